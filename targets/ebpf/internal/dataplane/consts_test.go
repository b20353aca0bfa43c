package dataplane

import (
	"bufio"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// The tests name contract values (drop reasons, roles, ...) by their macro in
// the generated bpf/p4constants.h, the same header the datapath compiles
// against, instead of repeating the numbers.
var (
	constsOnce sync.Once
	consts     map[string]uint64
	constsErr  error
)

func p4const(t testing.TB, name string) uint64 {
	t.Helper()
	constsOnce.Do(func() {
		consts = map[string]uint64{}
		f, err := os.Open(filepath.Join("..", "..", "bpf", "p4constants.h"))
		if err != nil {
			constsErr = err
			return
		}
		defer f.Close()
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			fields := strings.Fields(sc.Text())
			if len(fields) < 3 || fields[0] != "#define" {
				continue
			}
			v, err := strconv.ParseUint(strings.TrimRight(fields[2], "uUlL"), 0, 64)
			if err == nil {
				consts[fields[1]] = v
			}
		}
		constsErr = sc.Err()
	})
	if constsErr != nil {
		t.Fatalf("read p4constants.h: %v", constsErr)
	}
	v, ok := consts[name]
	if !ok {
		t.Fatalf("p4constants.h defines no %s", name)
	}
	return v
}

func drop(t testing.TB, name string) uint16 { return uint16(p4const(t, "DROP_REASON_"+name)) }
func punt(t testing.TB, name string) uint16 { return uint16(p4const(t, "PUNT_REASON_"+name)) }
func role(t testing.TB, name string) uint8  { return uint8(p4const(t, "PORT_ROLE_"+name)) }
