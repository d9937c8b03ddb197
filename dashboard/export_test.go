package dashboard

// OpenStreams returns how many event streams subject has open on s.
func OpenStreams(s *Server, subject string) int { return s.streams.count(subject) }

// HubBlock is hubBlock, how long the hub's read of the notifications
// blocks, for the external tests' bounds.
const HubBlock = hubBlock
