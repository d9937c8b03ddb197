// Command facade writes a public package's facade over an internal one
// (package internal/facade):
//
//	go run ./internal/tools/facade -src internal/core,internal/engine -pkg workflow -out workflow/facade.go
//
// Names listed with -skip (comma-separated) or in -skipfile (one a line,
// "#" starts a comment) are left out: the internal package's machinery that
// programs of this module use directly.
package main

import (
	"flag"
	"fmt"
	"os"
	"strings"

	"github.com/cairnhq/cairn/internal/facade"
)

func main() {
	src := flag.String("src", "", "directories of the internal packages, comma-separated")
	pkg := flag.String("pkg", "", "name of the public package")
	out := flag.String("out", "", "file to write; - for standard output")
	skip := flag.String("skip", "", "comma-separated names not to export")
	skipFile := flag.String("skipfile", "", "file of names not to export (facade.ReadSkip)")
	flag.Parse()
	if *src == "" || *pkg == "" || *out == "" {
		flag.Usage()
		os.Exit(2)
	}
	names := strings.Split(*skip, ",")
	if *skipFile != "" {
		more, err := facade.ReadSkip(*skipFile)
		if err != nil {
			fmt.Fprintln(os.Stderr, "facade:", err)
			os.Exit(1)
		}
		names = append(names, more...)
	}
	b, err := facade.Generate(strings.Split(*src, ","), *pkg, names)
	if err != nil {
		fmt.Fprintln(os.Stderr, "facade:", err)
		os.Exit(1)
	}
	if *out == "-" {
		_, _ = os.Stdout.Write(b)
		return
	}
	if err := os.WriteFile(*out, b, 0o644); err != nil { //nolint:gosec // a source file of the repository
		fmt.Fprintln(os.Stderr, "facade:", err)
		os.Exit(1)
	}
}
