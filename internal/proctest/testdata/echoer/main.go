// Command echoer is a helper program for the proctest tests.
//
// Usage:
//
//	echoer [-exit N] [-sleep] [-stderr MSG] [-env NAME] [LINE...]
//
// It prints MSG on stderr, NAME=VALUE from its environment and each LINE on
// stdout, in that order, and then "ready". By default it then echoes each
// line of stdin back as "echo: LINE" until EOF and exits with code N. With
// -sleep it instead blocks until it is killed; on SIGTERM it prints
// "terminating" and exits with code N.
package main

import (
	"bufio"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	exitCode := flag.Int("exit", 0, "exit code")
	sleep := flag.Bool("sleep", false, "block until killed instead of echoing stdin")
	stderr := flag.String("stderr", "", "message to print on stderr")
	env := flag.String("env", "", "name of an environment variable to print")
	flag.Parse()

	if *stderr != "" {
		fmt.Fprintln(os.Stderr, *stderr)
	}
	if *env != "" {
		fmt.Printf("%s=%s\n", *env, os.Getenv(*env))
	}

	for _, line := range flag.Args() {
		fmt.Println(line)
	}

	if *sleep {
		sigs := make(chan os.Signal, 1)
		signal.Notify(sigs, syscall.SIGTERM)
		fmt.Println("ready")
		<-sigs
		fmt.Println("terminating")
		os.Exit(*exitCode)
	}

	fmt.Println("ready")
	sc := bufio.NewScanner(os.Stdin)
	for sc.Scan() {
		fmt.Printf("echo: %s\n", sc.Text())
	}
	os.Exit(*exitCode)
}
