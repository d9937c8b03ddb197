package maintenance

import (
	"testing"

	"github.com/cairnhq/cairn/internal/redistest"
)

func TestMain(m *testing.M) { redistest.Main(m) }
