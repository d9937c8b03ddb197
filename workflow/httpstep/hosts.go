package httpstep

import (
	"errors"
	"fmt"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
)

// hostPattern is one entry of an allowed-hosts list.
type hostPattern struct {
	host     string // canonical (see canonicalHost)
	ip       bool   // host is an IP address
	wildcard bool   // "*.host": any name under host, not host itself
	port     int    // 0: the scheme's default port only
}

// String returns the entry in its canonical form.
func (p hostPattern) String() string {
	h := p.host
	if p.ip && strings.Contains(h, ":") {
		h = "[" + h + "]"
	}
	if p.wildcard {
		h = "*." + h
	}
	if p.port != 0 {
		h += ":" + strconv.Itoa(p.port)
	}
	return h
}

// ParseAllowedHost checks one entry of an allowed-hosts list (see
// Spec.AllowedHosts) and returns it in canonical form: lower case, without
// a trailing dot, IP addresses as net/netip writes them.
func ParseAllowedHost(entry string) (string, error) {
	p, err := parseHostPattern(entry)
	if err != nil {
		return "", err
	}
	return p.String(), nil
}

// parseHostPattern parses an allowed-hosts entry: HOST or HOST:PORT, where
// HOST is a host name, "*." and a host name, an IPv4 address or an IPv6
// address in brackets.
func parseHostPattern(entry string) (hostPattern, error) {
	var p hostPattern
	if entry == "" {
		return p, errors.New("empty host")
	}
	if strings.Contains(entry, "://") {
		return p, fmt.Errorf("%q: want a host name like api.example.com or api.example.com:8443, not a URL", entry)
	}
	for i := range len(entry) {
		if c := entry[i]; c <= ' ' || c >= 0x7f || strings.IndexByte("/?#@\\%,;", c) >= 0 {
			if c >= 0x80 {
				return p, fmt.Errorf("%q: not ASCII (write an international name in its xn-- form)", entry)
			}
			return p, fmt.Errorf("%q: %q cannot be part of a host", entry, c)
		}
	}
	host, port, bracketed, err := splitHostPort(entry)
	if err != nil {
		return p, fmt.Errorf("%q: %w", entry, err)
	}
	if port != "" {
		if p.port, err = parsePort(port); err != nil {
			return p, fmt.Errorf("%q: %w", entry, err)
		}
	}
	if rest, ok := strings.CutPrefix(host, "*."); ok && !bracketed {
		p.wildcard = true
		host = rest
	}
	if p.host, p.ip, err = canonicalHost(host, bracketed); err != nil {
		return p, fmt.Errorf("%q: %w", entry, err)
	}
	if p.wildcard && (p.ip || !strings.Contains(p.host, ".")) {
		return p, fmt.Errorf("%q: a wildcard needs a domain of at least two labels after *., like *.example.com", entry)
	}
	return p, nil
}

// splitHostPort splits HOST[:PORT] or [IPV6][:PORT].
func splitHostPort(s string) (host, port string, bracketed bool, err error) {
	if rest, ok := strings.CutPrefix(s, "["); ok {
		host, after, ok := strings.Cut(rest, "]")
		if !ok {
			return "", "", false, errors.New("missing ] after an IPv6 address")
		}
		if after == "" {
			return host, "", true, nil
		}
		port, ok := strings.CutPrefix(after, ":")
		if !ok {
			return "", "", false, fmt.Errorf("unexpected %q after ]", after)
		}
		return host, port, true, nil
	}
	switch strings.Count(s, ":") {
	case 0:
		return s, "", false, nil
	case 1:
		host, port, _ := strings.Cut(s, ":")
		return host, port, false, nil
	}
	return "", "", false, errors.New("an IPv6 address must be in brackets, like [::1]:8080")
}

// parsePort parses a port number, 1 to 65535.
func parsePort(s string) (int, error) {
	n, err := strconv.Atoi(s)
	if err != nil || s[0] == '+' || s[0] == '-' || n < 1 || n > 65535 {
		return 0, fmt.Errorf("port %q: want a number from 1 to 65535", s)
	}
	return n, nil
}

// canonicalHost checks a host and returns it lower-cased, without a
// trailing dot, an IP address in net/netip's form (without brackets). A
// name is labels of letters, digits, '-' and '_' (ASCII only: IDNs in
// their xn-- form), whose last is not a number (127.1 and 0x7f000001 are
// IPv4 addresses to some resolvers). An IPv6 address must be bracketed and
// have no zone; an IPv4 address must not be.
func canonicalHost(host string, bracketed bool) (string, bool, error) {
	if bracketed {
		a, err := netip.ParseAddr(host)
		if err != nil || !a.Is6() {
			return "", false, fmt.Errorf("%q is not an IPv6 address", host)
		}
		if a.Zone() != "" {
			return "", false, errors.New("an IPv6 zone is not allowed")
		}
		return a.String(), true, nil
	}
	host = strings.ToLower(host)
	if h, ok := strings.CutSuffix(host, "."); ok && h != "" {
		host = h
	}
	if host == "" {
		return "", false, errors.New("empty host")
	}
	if a, err := netip.ParseAddr(host); err == nil {
		if !a.Is4() {
			return "", false, errors.New("an IPv6 address must be in brackets")
		}
		return a.String(), true, nil
	}
	if len(host) > 253 {
		return "", false, errors.New("host name longer than 253 bytes")
	}
	labels := strings.Split(host, ".")
	for _, l := range labels {
		if l == "" || len(l) > 63 {
			return "", false, fmt.Errorf("host name %q has an empty or too long label", host)
		}
		for i := range len(l) {
			if c := l[i]; (c < 'a' || c > 'z') && (c < '0' || c > '9') && c != '-' && c != '_' {
				return "", false, fmt.Errorf("%q is not a host name (%q)", host, c)
			}
		}
	}
	if last := labels[len(labels)-1]; isNumeric(last) {
		return "", false, fmt.Errorf("%q is neither a host name (its last label is a number) nor an IPv4 address", host)
	}
	return host, false, nil
}

// isNumeric reports a label some resolvers read as (part of) an IPv4
// address: decimal, or hexadecimal with 0x.
func isNumeric(l string) bool {
	if h, ok := strings.CutPrefix(l, "0x"); ok {
		l = h
		return strings.Trim(l, "0123456789abcdef") == ""
	}
	return strings.Trim(l, "0123456789") == ""
}

// defaultPort is the port of a URL without one.
func defaultPort(scheme string) int {
	if scheme == "https" {
		return 443
	}
	return 80
}

// endpoint is the scheme, host and port a request goes to.
type endpoint struct {
	scheme string
	host   string // canonical
	ip     bool
	port   int
}

// endpointOf returns where u sends a request. A host that is not a host
// name or an IP address (see canonicalHost) is an error.
func endpointOf(u *url.URL) (endpoint, error) {
	e := endpoint{scheme: strings.ToLower(u.Scheme)}
	bracketed := strings.HasPrefix(u.Host, "[")
	var err error
	if e.host, e.ip, err = canonicalHost(u.Hostname(), bracketed); err != nil {
		return e, err
	}
	e.port = defaultPort(e.scheme)
	if p := u.Port(); p != "" {
		if e.port, err = parsePort(p); err != nil {
			return e, err
		}
	}
	return e, nil
}

func (e endpoint) String() string {
	h := e.host
	if e.ip && strings.Contains(h, ":") {
		h = "[" + h + "]"
	}
	return h + ":" + strconv.Itoa(e.port)
}

// allowList is the parsed Spec.AllowedHosts.
type allowList []hostPattern

// allows reports whether the list has an entry for e.
func (l allowList) allows(e endpoint) bool {
	for _, p := range l {
		want := p.port
		if want == 0 {
			want = defaultPort(e.scheme)
		}
		if e.port != want {
			continue
		}
		if p.wildcard {
			if !e.ip && strings.HasSuffix(e.host, "."+p.host) {
				return true
			}
		} else if p.host == e.host {
			return true
		}
	}
	return false
}

func (l allowList) String() string {
	s := make([]string, len(l))
	for i, p := range l {
		s[i] = p.String()
	}
	return strings.Join(s, ", ")
}
