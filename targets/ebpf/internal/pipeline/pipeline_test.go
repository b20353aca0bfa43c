package pipeline

import (
	"os"
	"testing"

	p4configv1 "github.com/p4lang/p4runtime/go/p4/config/v1"
	"google.golang.org/protobuf/encoding/prototext"
	"google.golang.org/protobuf/proto"
)

// The embedded copy must be the committed P4Info (make constants regenerates it).
func TestEmbeddedP4InfoIsCurrent(t *testing.T) {
	got, err := P4Info()
	if err != nil {
		t.Fatal(err)
	}
	src, err := os.ReadFile("../../../../p4src/v1model/supergw.p4info.txtpb")
	if err != nil {
		t.Skipf("source P4Info not available: %v", err)
	}
	want := &p4configv1.P4Info{}
	if err := prototext.Unmarshal(src, want); err != nil {
		t.Fatal(err)
	}
	if !proto.Equal(got, want) {
		t.Fatal("internal/pipeline/supergw.p4info.txtpb differs from p4src/v1model/supergw.p4info.txtpb: regenerate it")
	}
	if len(got.GetTables()) == 0 {
		t.Fatal("P4Info has no tables")
	}
}
