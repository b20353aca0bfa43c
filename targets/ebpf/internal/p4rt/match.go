package p4rt

import (
	"encoding/binary"
	"maps"
	"slices"

	p4configv1 "github.com/p4lang/p4runtime/go/p4/config/v1"
	p4v1 "github.com/p4lang/p4runtime/go/p4/v1"
	"google.golang.org/grpc/codes"
)

// fieldValue is one validated match field in canonical form (P4Runtime spec 8.4:
// bytestrings without leading zeros): an exact or LPM value, a ternary value and mask,
// an LPM prefix length.
type fieldValue struct {
	kind      p4configv1.MatchField_MatchType
	value     []byte
	mask      []byte // TERNARY
	prefixLen int32  // LPM
}

// entryKey identifies a table entry: its match fields by id (a ternary or LPM field
// left out is a wildcard and absent here) and, for a table with a ternary field, its
// priority (P4Runtime: entries with the same match and different priorities differ).
type entryKey struct {
	fields   map[uint32]fieldValue
	priority int32
}

// value is the value of field id, nil when it is absent (a wildcard).
func (k entryKey) value(id uint32) []byte { return k.fields[id].value }

func exactKey(values map[uint32][]byte) entryKey {
	k := entryKey{fields: map[uint32]fieldValue{}}
	for id, v := range values {
		k.fields[id] = fieldValue{kind: p4configv1.MatchField_EXACT, value: v}
	}
	return k
}

// matchString serialises a canonical key as a map key.
func matchString(k entryKey) string {
	var b []byte
	for _, id := range slices.Sorted(maps.Keys(k.fields)) {
		f := k.fields[id]
		b = binary.BigEndian.AppendUint32(b, id)
		b = append(b, byte(f.kind))
		b = binary.BigEndian.AppendUint32(b, uint32(f.prefixLen))
		for _, v := range [][]byte{f.value, f.mask} {
			b = binary.BigEndian.AppendUint16(b, uint16(len(v)))
			b = append(b, v...)
		}
	}
	return string(binary.BigEndian.AppendUint32(b, uint32(k.priority)))
}

// fieldMatches is the key as P4Runtime FieldMatches, ordered by field id.
func fieldMatches(k entryKey) []*p4v1.FieldMatch {
	var out []*p4v1.FieldMatch
	for _, id := range slices.Sorted(maps.Keys(k.fields)) {
		f := k.fields[id]
		fm := &p4v1.FieldMatch{FieldId: id}
		switch f.kind {
		case p4configv1.MatchField_LPM:
			fm.FieldMatchType = &p4v1.FieldMatch_Lpm{Lpm: &p4v1.FieldMatch_LPM{Value: f.value, PrefixLen: f.prefixLen}}
		case p4configv1.MatchField_TERNARY:
			fm.FieldMatchType = &p4v1.FieldMatch_Ternary_{Ternary: &p4v1.FieldMatch_Ternary{Value: f.value, Mask: f.mask}}
		default:
			fm.FieldMatchType = &p4v1.FieldMatch_Exact_{Exact: &p4v1.FieldMatch_Exact{Value: f.value}}
		}
		out = append(out, fm)
	}
	return out
}

// needsPriority: a table with a ternary, range or optional field orders its entries by
// priority (P4Runtime spec 9.1), and only such a table takes one.
func (t *tableInfo) needsPriority() bool {
	for _, mf := range t.t.GetMatchFields() {
		switch mf.GetMatchType() {
		case p4configv1.MatchField_TERNARY, p4configv1.MatchField_RANGE, p4configv1.MatchField_OPTIONAL:
			return true
		}
	}
	return false
}

// canonicalMatch validates match fields; with full=true (writes) every exact field must
// be present, otherwise (reads) any subset is a filter.
func (s *Server) canonicalMatch(ti *tableInfo, match []*p4v1.FieldMatch, full bool) (entryKey, error) {
	key := entryKey{fields: map[uint32]fieldValue{}}
	for _, fm := range match {
		mf, ok := ti.fields[fm.GetFieldId()]
		if !ok {
			return entryKey{}, errf(codes.InvalidArgument, "table '%s' has no match field id %d", ti.name(), fm.GetFieldId())
		}
		if _, dup := key.fields[fm.GetFieldId()]; dup {
			return entryKey{}, errf(codes.InvalidArgument, "match field '%s' given twice", mf.GetName())
		}
		f, err := canonicalField(mf, fm)
		if err != nil {
			return entryKey{}, err
		}
		key.fields[fm.GetFieldId()] = f
	}
	if full {
		for _, mf := range ti.t.GetMatchFields() {
			if _, ok := key.fields[mf.GetId()]; !ok && mf.GetMatchType() == p4configv1.MatchField_EXACT {
				return entryKey{}, errf(codes.InvalidArgument, "exact match field '%s' (id %d) of table '%s' is missing", mf.GetName(), mf.GetId(), ti.name())
			}
		}
	}
	return key, nil
}

// canonicalField checks one field against its P4Info match kind: the P4Runtime message
// of that kind, values that fit the bitwidth, an LPM prefix in 1..bitwidth with no
// value bit below it, a non-zero ternary mask with no value bit outside it (a
// zero-length prefix or an all-zero mask is a wildcard, which P4Runtime writes by
// leaving the field out).
func canonicalField(mf *p4configv1.MatchField, fm *p4v1.FieldMatch) (fieldValue, error) {
	name, width := mf.GetName(), mf.GetBitwidth()
	checkValue := func(what string, v []byte) error {
		if len(v) == 0 {
			return errf(codes.InvalidArgument, "match field '%s': empty %s", name, what)
		}
		if !fits(v, width) {
			return errf(codes.InvalidArgument, "match field '%s': %s 0x%x does not fit in %d bits", name, what, v, width)
		}
		return nil
	}
	switch mf.GetMatchType() {
	case p4configv1.MatchField_EXACT:
		ex, ok := fm.GetFieldMatchType().(*p4v1.FieldMatch_Exact_)
		if !ok {
			return fieldValue{}, errf(codes.InvalidArgument, "match field '%s' is exact, got %T", name, fm.GetFieldMatchType())
		}
		if err := checkValue("value", ex.Exact.GetValue()); err != nil {
			return fieldValue{}, err
		}
		return fieldValue{kind: mf.GetMatchType(), value: canonical(ex.Exact.GetValue())}, nil
	case p4configv1.MatchField_LPM:
		lpm, ok := fm.GetFieldMatchType().(*p4v1.FieldMatch_Lpm)
		if !ok {
			return fieldValue{}, errf(codes.InvalidArgument, "match field '%s' is lpm, got %T", name, fm.GetFieldMatchType())
		}
		v, plen := lpm.Lpm.GetValue(), lpm.Lpm.GetPrefixLen()
		if err := checkValue("value", v); err != nil {
			return fieldValue{}, err
		}
		if plen < 1 || plen > width {
			return fieldValue{}, errf(codes.InvalidArgument, "match field '%s': prefix_len %d not in [1, %d] (a match-all prefix is written by leaving the field out)", name, plen, width)
		}
		if bitLen(v) > 0 && trailingZeros(v) < int(width-plen) {
			return fieldValue{}, errf(codes.InvalidArgument, "match field '%s': value 0x%x has bits set below its /%d prefix", name, v, plen)
		}
		return fieldValue{kind: mf.GetMatchType(), value: canonical(v), prefixLen: plen}, nil
	case p4configv1.MatchField_TERNARY:
		tm, ok := fm.GetFieldMatchType().(*p4v1.FieldMatch_Ternary_)
		if !ok {
			return fieldValue{}, errf(codes.InvalidArgument, "match field '%s' is ternary, got %T", name, fm.GetFieldMatchType())
		}
		v, m := tm.Ternary.GetValue(), tm.Ternary.GetMask()
		if err := checkValue("value", v); err != nil {
			return fieldValue{}, err
		}
		if err := checkValue("mask", m); err != nil {
			return fieldValue{}, err
		}
		if bitLen(m) == 0 {
			return fieldValue{}, errf(codes.InvalidArgument, "match field '%s': mask is zero (a wildcard is written by leaving the field out)", name)
		}
		if outsideMask(v, m) {
			return fieldValue{}, errf(codes.InvalidArgument, "match field '%s': value 0x%x has bits set outside mask 0x%x", name, v, m)
		}
		return fieldValue{kind: mf.GetMatchType(), value: canonical(v), mask: canonical(m)}, nil
	}
	return fieldValue{}, errf(codes.Unimplemented, "match field '%s': match type %v is not supported", name, mf.GetMatchType())
}

// trailingZeros counts the zero bits at the low end of a non-zero bytestring.
func trailingZeros(b []byte) int {
	n := 0
	for i := len(b) - 1; i >= 0; i-- {
		if b[i] != 0 {
			for x := b[i]; x&1 == 0; x >>= 1 {
				n++
			}
			return n
		}
		n += 8
	}
	return n
}

// outsideMask reports whether value has a bit set where mask has none.
func outsideMask(value, mask []byte) bool {
	for i := 1; i <= len(value); i++ {
		m := byte(0)
		if i <= len(mask) {
			m = mask[len(mask)-i]
		}
		if value[len(value)-i]&^m != 0 {
			return true
		}
	}
	return false
}

// matches reports whether a stored key passes a read filter: every field the filter
// names is equal, and so is the priority when the filter gives one.
func matches(key, filter entryKey) bool {
	for id, f := range filter.fields {
		k, ok := key.fields[id]
		if !ok || string(k.value) != string(f.value) || string(k.mask) != string(f.mask) || k.prefixLen != f.prefixLen {
			return false
		}
	}
	return filter.priority == 0 || key.priority == filter.priority
}
