package dashboard

import (
	"crypto/hkdf"
	"crypto/sha256"
)

// csrfKeyInfo labels the key CSRFKeyFromSecret derives, so that the same
// secret can key other things under other labels without the keys being
// related.
const csrfKeyInfo = "cairn dashboard csrf key v1"

// CSRFKeyFromSecret derives Config.CSRFKey from a secret that every replica
// of a deployment shares (the worker's CAIRN_DASHBOARD_SECRET), with
// HKDF-SHA256 and a fixed label: servers given the same secret accept each
// other's CSRF tokens, so a page served by one replica can act through
// another (a load balancer, a restart). The secret should be random and at
// least 32 bytes long; the worker's configuration refuses shorter ones.
//
// Nothing else of a Server is per process: the sign-in cookie holds the
// API token itself, checked against the tokens file, and event stream IDs
// are the Redis stream's.
func CSRFKeyFromSecret(secret string) []byte {
	key, err := hkdf.Key(sha256.New, []byte(secret), nil, csrfKeyInfo, sha256.Size)
	if err != nil { // only for a key longer than 255 hashes
		panic("dashboard: " + err.Error())
	}
	return key
}
