// Package pipeline embeds the P4Info of the supergw program, the only pipeline
// the eBPF target runs. supergw.p4info.txtpb is generated from
// p4src/v1model/supergw.p4info.txtpb (do not edit it by hand).
package pipeline

import (
	_ "embed"
	"fmt"

	p4configv1 "github.com/p4lang/p4runtime/go/p4/config/v1"
	"google.golang.org/protobuf/encoding/prototext"
)

//go:embed supergw.p4info.txtpb
var p4infoText []byte

// P4Info returns a fresh copy of the embedded supergw P4Info.
func P4Info() (*p4configv1.P4Info, error) {
	info := &p4configv1.P4Info{}
	if err := prototext.Unmarshal(p4infoText, info); err != nil {
		return nil, fmt.Errorf("parse embedded supergw.p4info.txtpb: %w", err)
	}
	return info, nil
}
