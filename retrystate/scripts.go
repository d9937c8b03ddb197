package retrystate

import (
	"embed"

	"github.com/redis/go-redis/v9"
)

//go:embed lua/*.lua
var luaFS embed.FS

// scripts holds the loaded Lua scripts of one Store. Each run-level script is
// common.lua followed by the script's own file.
type scripts struct {
	create, begin, complete, fail, cancel, renew *redis.Script
	redispatch, repair, timeout, operate         *redis.Script
	unlock, peek                                 *redis.Script
}

func loadScripts() scripts {
	common := mustRead("lua/common.lua")
	withCommon := func(name string) *redis.Script {
		return redis.NewScript(common + "\n" + mustRead("lua/"+name))
	}
	return scripts{
		create:     withCommon("create.lua"),
		begin:      withCommon("begin.lua"),
		complete:   withCommon("complete.lua"),
		fail:       withCommon("fail.lua"),
		cancel:     withCommon("cancel.lua"),
		renew:      redis.NewScript(mustRead("lua/renew.lua")),
		redispatch: withCommon("redispatch.lua"),
		repair:     withCommon("repair.lua"),
		timeout:    withCommon("timeout.lua"),
		operate:    withCommon("operate.lua"),
		unlock:     redis.NewScript(mustRead("lua/unlock.lua")),
		peek:       redis.NewScript(mustRead("lua/peek.lua")),
	}
}

func mustRead(name string) string {
	b, err := luaFS.ReadFile(name)
	if err != nil { // embedded at build time: a missing file is a build bug
		panic("retrystate: " + err.Error())
	}
	return string(b)
}
