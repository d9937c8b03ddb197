package dashboard

// OpenStreams returns how many event streams subject has open on s.
func OpenStreams(s *Server, subject string) int { return s.streams.count(subject) }
