package cli_test

import (
	"testing"

	"github.com/cairnhq/cairn/internal/testkit"
)

func TestMain(m *testing.M) { testkit.Main(m) }
