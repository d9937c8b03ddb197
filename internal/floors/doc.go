// Package floors holds the test that keeps Cairn's packages stacked in
// floors: each package imports only packages on floors below its own, so
// that the engine never reaches up into the public API and the programs sit
// on top of everything. The floors are listed in floors_test.go, which is
// the one place a new package is given its floor; docs/architecture.md
// draws them.
package floors
