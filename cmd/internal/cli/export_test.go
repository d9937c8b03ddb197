package cli

// PingTimeout is pingTimeout, for the external tests' bounds.
const PingTimeout = pingTimeout
