package p4rt

import (
	"fmt"

	p4configv1 "github.com/p4lang/p4runtime/go/p4/config/v1"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// normaliseP4Info drops what does not change the pipeline's meaning:
// pkg_info (build metadata), documentation and annotation source locations.
func normaliseP4Info(in *p4configv1.P4Info) *p4configv1.P4Info {
	out := proto.Clone(in).(*p4configv1.P4Info)
	out.PkgInfo = nil
	clearFields(out.ProtoReflect())
	return out
}

func clearFields(m protoreflect.Message) {
	m.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		switch fd.Name() {
		case "doc", "annotation_locations":
			m.Clear(fd)
			return true
		}
		if fd.Kind() != protoreflect.MessageKind && fd.Kind() != protoreflect.GroupKind {
			return true
		}
		switch {
		case fd.IsList():
			l := v.List()
			for i := 0; i < l.Len(); i++ {
				clearFields(l.Get(i).Message())
			}
		case fd.IsMap():
			if fd.MapValue().Kind() == protoreflect.MessageKind {
				v.Map().Range(func(_ protoreflect.MapKey, mv protoreflect.Value) bool {
					clearFields(mv.Message())
					return true
				})
			}
		default:
			clearFields(v.Message())
		}
		return true
	})
}

type p4entity struct {
	name string
	msg  protoreflect.Message
}

// entitiesByID indexes the elements of a repeated P4Info field that carry a
// preamble.
func entitiesByID(l protoreflect.List) (map[uint32]p4entity, []uint32, bool) {
	out := map[uint32]p4entity{}
	var order []uint32
	for i := 0; i < l.Len(); i++ {
		m := l.Get(i).Message()
		pfd := m.Descriptor().Fields().ByName("preamble")
		if pfd == nil {
			return nil, nil, false
		}
		pre, ok := m.Get(pfd).Message().Interface().(*p4configv1.Preamble)
		if !ok {
			return nil, nil, false
		}
		out[pre.GetId()] = p4entity{name: pre.GetName(), msg: m}
		order = append(order, pre.GetId())
	}
	return out, order, true
}

// diffP4Info returns "" when got is semantically equal to want, else a
// description of the first difference.
func diffP4Info(want, got *p4configv1.P4Info) string {
	w, g := normaliseP4Info(want).ProtoReflect(), normaliseP4Info(got).ProtoReflect()
	fields := w.Descriptor().Fields()
	for i := 0; i < fields.Len(); i++ {
		fd := fields.Get(i)
		kind := string(fd.Name())
		if !fd.IsList() {
			if !proto.Equal(w.Get(fd).Message().Interface(), g.Get(fd).Message().Interface()) {
				return fmt.Sprintf("%s differs from the supergw P4Info", kind)
			}
			continue
		}
		we, _, okw := entitiesByID(w.Get(fd).List())
		ge, gorder, okg := entitiesByID(g.Get(fd).List())
		if !okw || !okg {
			if !listEqual(w.Get(fd).List(), g.Get(fd).List()) {
				return fmt.Sprintf("%s differ from the supergw P4Info", kind)
			}
			continue
		}
		for _, id := range gorder {
			ent := ge[id]
			wantEnt, ok := we[id]
			if !ok {
				return fmt.Sprintf("%s %#08x '%s' not in supergw P4Info", singular(kind), id, ent.name)
			}
			if !proto.Equal(wantEnt.msg.Interface(), ent.msg.Interface()) {
				return fmt.Sprintf("%s %#08x '%s' differs from the supergw P4Info", singular(kind), id, ent.name)
			}
		}
		for id, ent := range we {
			if _, ok := ge[id]; !ok {
				return fmt.Sprintf("%s %#08x '%s' of the supergw P4Info is missing", singular(kind), id, ent.name)
			}
		}
	}
	return ""
}

func listEqual(a, b protoreflect.List) bool {
	if a.Len() != b.Len() {
		return false
	}
	for i := 0; i < a.Len(); i++ {
		if !proto.Equal(a.Get(i).Message().Interface(), b.Get(i).Message().Interface()) {
			return false
		}
	}
	return true
}

func singular(kind string) string {
	switch kind {
	case "controller_packet_metadata":
		return kind
	case "direct_counters":
		return "direct_counter"
	}
	if n := len(kind); n > 1 && kind[n-1] == 's' {
		return kind[:n-1]
	}
	return kind
}
