package dashboard

import "errors"

// The package's sentinel errors.
var (
	// errUnauthenticated is a missing or unknown credential.
	errUnauthenticated = errors.New("missing or invalid credentials")
	// errCSRF is a cookie-authenticated state change without a valid
	// CSRF token.
	errCSRF = errors.New("missing or invalid CSRF token")
	// errStreamIDRange: a part of a stream entry ID is out of range.
	errStreamIDRange = errors.New("out of range")
)
