package ginlimit_test

import (
	"os"
	"testing"

	"github.com/gin-gonic/gin"
)

func TestMain(m *testing.M) {
	gin.SetMode(gin.TestMode) // no debug route listing on stdout, which examples check
	os.Exit(m.Run())
}
