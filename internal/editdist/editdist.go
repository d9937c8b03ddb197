// Package editdist measures how far apart two short strings are, for the
// "did you mean" suggestions of the CLI (unknown flags) and of the YAML
// loader (unknown keys and values).
package editdist

// maxLen bounds the strings Distance compares: a longer one is no typo of a
// name, and its table would cost len(a)*len(b).
const maxLen = 64

// Far is what Distance returns for a string longer than 64 bytes: further
// than any suggestion goes.
const Far = 99

// Distance returns the Levenshtein distance between a and b: insertions,
// deletions and substitutions of bytes (the names compared are ASCII), or
// Far when either is longer than 64 bytes.
func Distance(a, b string) int {
	if len(a) > maxLen || len(b) > maxLen {
		return Far
	}
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
