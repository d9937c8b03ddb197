package dashboard

import "slices"

// OpenStreams returns how many event streams subject has open on s.
func OpenStreams(s *Server, subject string) int { return s.streams.count(subject) }

// HubBlock is hubBlock, how long the hub's read of the notifications
// blocks, for the external tests' bounds.
const HubBlock = hubBlock

// Routes returns the patterns of the routes s registered (not the web UI's
// pages), in order.
func Routes(s *Server) []string { return slices.Clone(s.patterns) }
