package p4rt

// binding.go is the only pipeline-specific file of the server: it maps the
// supergw P4 tables, actions, counters, digest and controller headers (looked
// up by name in the P4Info) onto Dataplane calls. Everything else in this
// package is driven by the P4Info alone.

import (
	"errors"
	"fmt"
	"time"

	p4v1 "github.com/p4lang/p4runtime/go/p4/v1"

	"supergw/targets/ebpf/internal/dataplane"
	c "supergw/targets/ebpf/internal/p4constants"
)

// dropPacketOutBadPort is counted when a packet-out names a port that is not
// a configured front port.
const dropPacketOutBadPort = uint16(c.DropReasonPacketOutBadPort)

type binding struct {
	dp dataplane.Dataplane

	portRoles, settings, hostIPs, buckets, macTable, learned uint32

	portRolesPort, hostIPsTarget, bucketsBucket, macDst, learnedMAC, learnedPort uint32

	setPortRole, setDispatch, unconfigured, replyHostMAC, setGateway, setOutputPort, markKnown uint32

	roleParam, gwIPParam, vmacParam, maskParam, hashParam, hostMACParam, gwPortParam, gwMACParam, outPortParam, outRoleParam uint32

	dropCounter, bucketCounter uint32
	dropCounterSize            int64

	// Remote access: ra_settings, and the tables whose action sends to a gateway
	// (client_pools, client_pins, ike_spi_labels, esp_spi_ranges) by table id.
	raSettings, setRA, raUnconfigured, publicIPParam, publicMACParam uint32
	dispatch                                                         map[uint32]dispatchBinding

	learnDigest uint32
	// digestMembers lists learn_digest_t member names in P4Info order.
	digestMembers []string

	// IPv6 Neighbor Discovery: nd_settings, host_ip6s, learned_ip6s, learn_ip6_digest_t.
	ndSettings, setND, ndUnconfigured, llParam, guaParam        uint32
	hostIP6s, hostIP6sTarget, advertiseHostMAC, hostIP6MACParam uint32
	learnedIP6s, learnedIP6sIP, learnedIP6sMAC, markIP6Known    uint32
	learnIP6Digest                                              uint32
	digestIP6Members                                            []string

	// Gateway liveness: gateway_backups and its two per-port counters.
	gatewayBackups, gatewayBackupsPort, setBackup       uint32
	backupPortParam, backupMACParam, backupTimeoutParam uint32
	portCounters                                        map[uint32]dataplane.PortCounter

	pktInIngressPort, pktInReason, pktOutEgressPort   uint32
	pktInPortWidth, pktInReasonWidth, pktOutPortWidth int32
	// pktOutHeaderBytes is the size of the packet_out header on the CPU port: the
	// P4 program counts a dropped packet-out with its header, so must we.
	pktOutHeaderBytes int
}

// newBinding resolves every name the binding needs; a P4Info without one of
// them is not the supergw pipeline.
func newBinding(s *schema, dp dataplane.Dataplane) (*binding, error) {
	b := &binding{dp: dp}
	var errs []error
	tbl := func(name string) *tableInfo {
		t, err := s.tableByName(name)
		if err != nil {
			errs = append(errs, err)
			return &tableInfo{t: nil, fields: nil}
		}
		return t
	}
	field := func(t *tableInfo, name string) uint32 {
		if t.t == nil {
			return 0
		}
		id, err := t.fieldID(name)
		if err != nil {
			errs = append(errs, err)
		}
		return id
	}
	act := func(name string) *actionInfo {
		a, err := s.actionByName(name)
		if err != nil {
			errs = append(errs, err)
			return &actionInfo{}
		}
		return a
	}
	param := func(a *actionInfo, name string) uint32 {
		if a.a == nil {
			return 0
		}
		id, err := a.paramID(name)
		if err != nil {
			errs = append(errs, err)
		}
		return id
	}
	id := func(t *tableInfo) uint32 { return t.t.GetPreamble().GetId() }
	aid := func(a *actionInfo) uint32 { return a.a.GetPreamble().GetId() }

	pr, st, hi, bk, mt, ls := tbl(c.TablePortRoles), tbl(c.TableSettings), tbl(c.TableHostIPs), tbl(c.TableBuckets), tbl(c.TableMACTable), tbl(c.TableLearnedSources)
	b.portRoles, b.settings, b.hostIPs, b.buckets, b.macTable, b.learned = id(pr), id(st), id(hi), id(bk), id(mt), id(ls)
	b.portRolesPort = field(pr, c.MatchPortRolesPort)
	b.hostIPsTarget = field(hi, c.MatchHostIPsTargetIP)
	b.bucketsBucket = field(bk, c.MatchBucketsBucket)
	b.macDst = field(mt, c.MatchMACTableDstMAC)
	b.learnedMAC = field(ls, c.MatchLearnedSourcesSrcMAC)
	b.learnedPort = field(ls, c.MatchLearnedSourcesPort)

	spr, sdc, unc, rhm, sgw, sop, mk := act(c.ActionSetPortRole), act(c.ActionSetDispatchConfig), act(c.ActionMarkUnconfigured), act(c.ActionReplyWithHostMAC), act(c.ActionSetGateway), act(c.ActionSetOutputPort), act(c.ActionMarkKnown)
	b.setPortRole, b.setDispatch, b.unconfigured, b.replyHostMAC, b.setGateway, b.setOutputPort, b.markKnown = aid(spr), aid(sdc), aid(unc), aid(rhm), aid(sgw), aid(sop), aid(mk)
	b.roleParam = param(spr, c.ParamSetPortRoleRole)
	b.gwIPParam, b.vmacParam, b.maskParam = param(sdc, c.ParamSetDispatchConfigGatewayIP), param(sdc, c.ParamSetDispatchConfigVmacBase), param(sdc, c.ParamSetDispatchConfigBucketMask)
	b.hashParam = param(sdc, c.ParamSetDispatchConfigBucketHash)
	b.hostMACParam = param(rhm, c.ParamReplyWithHostMACHostMAC)
	b.gwPortParam, b.gwMACParam = param(sgw, c.ParamSetGatewayPort), param(sgw, c.ParamSetGatewayGatewayMAC)
	b.outPortParam, b.outRoleParam = param(sop, c.ParamSetOutputPortPort), param(sop, c.ParamSetOutputPortRole)

	b.portCounters = map[uint32]dataplane.PortCounter{}
	for cid, ctr := range s.counters {
		switch ctr.GetPreamble().GetName() {
		case c.CounterDropCounter:
			b.dropCounter, b.dropCounterSize = cid, ctr.GetSize()
		case c.CounterLivenessFrames:
			b.portCounters[cid] = dataplane.LivenessFrames
		case c.CounterFailoverFrames:
			b.portCounters[cid] = dataplane.FailoverFrames
		}
	}
	if len(b.portCounters) != 2 {
		errs = append(errs, fmt.Errorf("counters %q and %q not both in P4Info", c.CounterLivenessFrames, c.CounterFailoverFrames))
	}
	gb, sbk := tbl(c.TableGatewayBackups), act(c.ActionSetBackup)
	b.gatewayBackups, b.gatewayBackupsPort, b.setBackup = id(gb), field(gb, c.MatchGatewayBackupsPort), aid(sbk)
	b.backupPortParam, b.backupMACParam = param(sbk, c.ParamSetBackupPort), param(sbk, c.ParamSetBackupGatewayMAC)
	b.backupTimeoutParam = param(sbk, c.ParamSetBackupTimeoutUs)
	for dcid, dc := range s.directCounters {
		if dc.GetPreamble().GetName() == c.DirectCounterBucketCounter {
			b.bucketCounter = dcid
		}
	}
	for did, d := range s.digests {
		st := s.info.GetTypeInfo().GetStructs()[d.GetTypeSpec().GetStruct().GetName()]
		switch d.GetPreamble().GetName() {
		case c.DigestLearnDigest:
			b.learnDigest = did
			for _, m := range st.GetMembers() {
				b.digestMembers = append(b.digestMembers, m.GetName())
			}
		case c.DigestLearnIP6Digest:
			b.learnIP6Digest = did
			for _, m := range st.GetMembers() {
				b.digestIP6Members = append(b.digestIP6Members, m.GetName())
			}
		}
	}
	nds, snd, ndu := tbl(c.TableNDSettings), act(c.ActionSetNDConfig), act(c.ActionMarkNDUnconfigured)
	b.ndSettings, b.setND, b.ndUnconfigured = id(nds), aid(snd), aid(ndu)
	b.llParam, b.guaParam = param(snd, c.ParamSetNDConfigLinkLocalIP6), param(snd, c.ParamSetNDConfigGlobalIP6)
	hi6, ahm := tbl(c.TableHostIP6s), act(c.ActionAdvertiseHostMAC)
	b.hostIP6s, b.hostIP6sTarget, b.advertiseHostMAC = id(hi6), field(hi6, c.MatchHostIP6sTargetIP6), aid(ahm)
	b.hostIP6MACParam = param(ahm, c.ParamAdvertiseHostMACHostMAC)
	li6, mk6 := tbl(c.TableLearnedIP6s), act(c.ActionMarkIP6Known)
	b.learnedIP6s, b.markIP6Known = id(li6), aid(mk6)
	b.learnedIP6sIP, b.learnedIP6sMAC = field(li6, c.MatchLearnedIP6sSrcIP6), field(li6, c.MatchLearnedIP6sSrcMAC)
	ra, sra, rau := tbl(c.TableRASettings), act(c.ActionSetRAConfig), act(c.ActionMarkRAUnconfigured)
	b.raSettings, b.setRA, b.raUnconfigured = id(ra), aid(sra), aid(rau)
	b.publicIPParam, b.publicMACParam = param(sra, c.ParamSetRAConfigPublicIP), param(sra, c.ParamSetRAConfigPublicMAC)
	b.dispatch = map[uint32]dispatchBinding{}
	for _, d := range []struct {
		dt                   dataplane.DispatchTable
		table, field, action string
		portParam, macParam  string
		directCounter        string
	}{
		{dataplane.ClientPools, c.TableClientPools, c.MatchClientPoolsDstIP, c.ActionSetPoolGateway, c.ParamSetPoolGatewayPort, c.ParamSetPoolGatewayGatewayMAC, c.DirectCounterPoolCounter},
		{dataplane.ClientPins, c.TableClientPins, c.MatchClientPinsClientIP, c.ActionSetPinGateway, c.ParamSetPinGatewayPort, c.ParamSetPinGatewayGatewayMAC, c.DirectCounterPinCounter},
		{dataplane.IKESPILabels, c.TableIKESPILabels, c.MatchIKESPILabelsIKESPI, c.ActionSetIKEGateway, c.ParamSetIKEGatewayPort, c.ParamSetIKEGatewayGatewayMAC, c.DirectCounterIKESPICounter},
		{dataplane.ESPSPIRanges, c.TableESPSPIRanges, c.MatchESPSPIRangesESPSPI, c.ActionSetESPGateway, c.ParamSetESPGatewayPort, c.ParamSetESPGatewayGatewayMAC, c.DirectCounterESPSPICounter},
	} {
		ti, ai := tbl(d.table), act(d.action)
		if ti.t == nil {
			continue
		}
		if _, ok := s.directCounterByName(d.directCounter); !ok {
			errs = append(errs, fmt.Errorf("direct counter %q not in P4Info", d.directCounter))
		}
		b.dispatch[id(ti)] = dispatchBinding{table: d.dt, field: field(ti, d.field), action: aid(ai),
			portParam: param(ai, d.portParam), macParam: param(ai, d.macParam)}
	}
	if b.dropCounter == 0 {
		errs = append(errs, fmt.Errorf("counter %q not in P4Info", c.CounterDropCounter))
	}
	if b.bucketCounter == 0 {
		errs = append(errs, fmt.Errorf("direct counter %q not in P4Info", c.DirectCounterBucketCounter))
	}
	if b.learnDigest == 0 {
		errs = append(errs, fmt.Errorf("digest %q not in P4Info", c.DigestLearnDigest))
	}
	for _, m := range b.digestMembers {
		if m != c.DigestLearnDigestSrcMAC && m != c.DigestLearnDigestPort && m != c.DigestLearnDigestSrcIP {
			errs = append(errs, fmt.Errorf("digest %q has unexpected member %q", c.DigestLearnDigest, m))
		}
	}
	if b.learnIP6Digest == 0 {
		errs = append(errs, fmt.Errorf("digest %q not in P4Info", c.DigestLearnIP6Digest))
	}
	for _, m := range b.digestIP6Members {
		if m != c.DigestLearnIP6DigestSrcMAC && m != c.DigestLearnIP6DigestPort && m != c.DigestLearnIP6DigestSrcIP6 {
			errs = append(errs, fmt.Errorf("digest %q has unexpected member %q", c.DigestLearnIP6Digest, m))
		}
	}
	var err error
	if b.pktInIngressPort, b.pktInPortWidth, err = metadataID(s.packetIn, c.CtrlHdrPacketInIngressPort); err != nil {
		errs = append(errs, err)
	}
	if b.pktInReason, b.pktInReasonWidth, err = metadataID(s.packetIn, c.CtrlHdrPacketInReason); err != nil {
		errs = append(errs, err)
	}
	if b.pktOutEgressPort, b.pktOutPortWidth, err = metadataID(s.packetOut, c.CtrlHdrPacketOutEgressPort); err != nil {
		errs = append(errs, err)
	}
	for _, m := range s.packetOut.GetMetadata() {
		b.pktOutHeaderBytes += int(m.GetBitwidth()) / 8
	}
	if len(errs) > 0 {
		return nil, fmt.Errorf("P4Info is not the supergw pipeline: %v", errs)
	}
	return b, nil
}

// dispatchBinding maps one gateway table (a match field, an action with port and
// gateway_mac) onto a dataplane.DispatchTable.
type dispatchBinding struct {
	table               dataplane.DispatchTable
	field, action       uint32
	portParam, macParam uint32
}

// key turns a canonical entry key into the data plane's: an absent (wildcard) field is
// value 0 with prefix 0 or mask 0.
func (d dispatchBinding) key(k entryKey) dataplane.DispatchKey {
	dk := dataplane.DispatchKey{Priority: k.priority}
	if f, ok := k.fields[d.field]; ok {
		dk.Value = toUint(f.value)
		dk.Mask = toUint(f.mask)
		dk.PrefixLen = uint8(f.prefixLen)
	}
	return dk
}

func u16(b []byte) uint16 { return uint16(toUint(b)) }

func mac(b []byte) dataplane.MAC {
	var m dataplane.MAC
	rightAlign(b, m[:])
	return m
}

func ipv6(b []byte) dataplane.IPv6 {
	var ip dataplane.IPv6
	rightAlign(b, ip[:])
	return ip
}

func ipv4(b []byte) dataplane.IPv4 {
	var ip dataplane.IPv4
	rightAlign(b, ip[:])
	return ip
}

func paramsOf(a *p4v1.Action) map[uint32][]byte {
	out := map[uint32][]byte{}
	for _, p := range a.GetParams() {
		out[p.GetParamId()] = p.GetValue()
	}
	return out
}

var errUnsupported = fmt.Errorf("not supported by the eBPF target")

// errBadValue is a value that fits its P4Info bitwidth but that the contract
// (docs/pipeline-contract.md) leaves undefined; refusing it keeps this target and
// BMv2 from silently behaving differently.
var errBadValue = errors.New("value outside the pipeline contract")

// setEntry installs (insert or modify) a non-default entry.
func (b *binding) setEntry(table uint32, match entryKey, a *p4v1.Action) error {
	p := paramsOf(a)
	switch {
	case table == b.portRoles && a.GetActionId() == b.setPortRole:
		role := c.PortRole(toUint(p[b.roleParam]))
		if role != c.PortRoleHost && role != c.PortRoleGateway && role != c.PortRoleUplink && role != c.PortRoleGatewayOutside {
			return fmt.Errorf("%w: role %d is not HOST (%d), GATEWAY (%d), UPLINK (%d) or GATEWAY_OUTSIDE (%d)", errBadValue, role,
				c.PortRoleHost, c.PortRoleGateway, c.PortRoleUplink, c.PortRoleGatewayOutside)
		}
		return b.dp.SetPortRole(u16(match.value(b.portRolesPort)), uint8(role))
	case table == b.hostIPs && a.GetActionId() == b.replyHostMAC:
		return b.dp.SetHostIP(ipv4(match.value(b.hostIPsTarget)), mac(p[b.hostMACParam]))
	case table == b.buckets && a.GetActionId() == b.setGateway:
		return b.dp.SetBucket(u16(match.value(b.bucketsBucket)), u16(p[b.gwPortParam]), mac(p[b.gwMACParam]))
	case table == b.macTable && a.GetActionId() == b.setOutputPort:
		// Any role is defined: only HOST lets a gateway's frame out (as in the P4 program).
		return b.dp.SetL2(mac(match.value(b.macDst)), u16(p[b.outPortParam]), uint8(toUint(p[b.outRoleParam])))
	case table == b.learned && a.GetActionId() == b.markKnown:
		return b.dp.SetLearned(mac(match.value(b.learnedMAC)), u16(match.value(b.learnedPort)))
	case table == b.hostIP6s && a.GetActionId() == b.advertiseHostMAC:
		return b.dp.SetHostIPv6(ipv6(match.value(b.hostIP6sTarget)), mac(p[b.hostIP6MACParam]))
	case table == b.learnedIP6s && a.GetActionId() == b.markIP6Known:
		return b.dp.SetLearnedIP6(ipv6(match.value(b.learnedIP6sIP)), mac(match.value(b.learnedIP6sMAC)))
	case table == b.gatewayBackups && a.GetActionId() == b.setBackup:
		timeout := toUint(p[b.backupTimeoutParam])
		if timeout == 0 {
			return fmt.Errorf("%w: timeout_us 0 (a gateway would be stale at once); give the longest silence in microseconds", errBadValue)
		}
		return b.dp.SetGatewayBackup(u16(match.value(b.gatewayBackupsPort)), dataplane.GatewayBackup{
			Port: u16(p[b.backupPortParam]), MAC: mac(p[b.backupMACParam]), Timeout: time.Duration(timeout) * time.Microsecond,
		})
	}
	if d, ok := b.dispatch[table]; ok && a.GetActionId() == d.action {
		return b.dp.SetDispatchEntry(d.table, d.key(match), dataplane.Gateway{Port: u16(p[d.portParam]), MAC: mac(p[d.macParam])})
	}
	return errUnsupported
}

// deleteEntry removes a non-default entry.
func (b *binding) deleteEntry(table uint32, match entryKey) error {
	switch table {
	case b.portRoles:
		return b.dp.DeletePortRole(u16(match.value(b.portRolesPort)))
	case b.hostIPs:
		return b.dp.DeleteHostIP(ipv4(match.value(b.hostIPsTarget)))
	case b.buckets:
		return b.dp.DeleteBucket(u16(match.value(b.bucketsBucket)))
	case b.macTable:
		return b.dp.DeleteL2(mac(match.value(b.macDst)))
	case b.learned:
		return b.dp.DeleteLearned(mac(match.value(b.learnedMAC)), u16(match.value(b.learnedPort)))
	case b.hostIP6s:
		return b.dp.DeleteHostIPv6(ipv6(match.value(b.hostIP6sTarget)))
	case b.learnedIP6s:
		return b.dp.DeleteLearnedIP6(ipv6(match.value(b.learnedIP6sIP)), mac(match.value(b.learnedIP6sMAC)))
	case b.gatewayBackups:
		return b.dp.DeleteGatewayBackup(u16(match.value(b.gatewayBackupsPort)))
	}
	if d, ok := b.dispatch[table]; ok {
		return b.dp.DeleteDispatchEntry(d.table, d.key(match))
	}
	return errUnsupported
}

// setDefault changes a table's default action. The data plane hard-codes the
// initial default of every table except settings, ra_settings and nd_settings, so only those
// may change.
func (b *binding) setDefault(table uint32, a *p4v1.Action, isInitial bool) error {
	if table == b.ndSettings {
		switch a.GetActionId() {
		case b.ndUnconfigured:
			return b.dp.SetNDConfig(dataplane.NDConfig{})
		case b.setND:
			p := paramsOf(a)
			return b.dp.SetNDConfig(dataplane.NDConfig{Configured: true, LinkLocal: ipv6(p[b.llParam]), Global: ipv6(p[b.guaParam])})
		}
	}
	if table == b.raSettings {
		switch a.GetActionId() {
		case b.raUnconfigured:
			return b.dp.SetRAConfig(dataplane.RAConfig{})
		case b.setRA:
			p := paramsOf(a)
			return b.dp.SetRAConfig(dataplane.RAConfig{Configured: true, PublicIP: ipv4(p[b.publicIPParam]), PublicMAC: mac(p[b.publicMACParam])})
		}
	}
	if table == b.settings {
		switch a.GetActionId() {
		case b.unconfigured:
			return b.dp.SetDispatchConfig(dataplane.DispatchConfig{})
		case b.setDispatch:
			p := paramsOf(a)
			vmac, mask, hash := mac(p[b.vmacParam]), u16(p[b.maskParam]), c.BucketHash(toUint(p[b.hashParam]))
			if vmac[4] != 0 || vmac[5] != 0 {
				return fmt.Errorf("%w: vmac_base %x must have its low 16 bits zero", errBadValue, vmac[:])
			}
			if mask&(mask+1) != 0 {
				return fmt.Errorf("%w: bucket_mask %#x is not K-1 for a power of two K", errBadValue, mask)
			}
			if hash != c.BucketHashCRC32 && hash != c.BucketHashIdentity {
				return fmt.Errorf("%w: bucket_hash %d is neither CRC32 (%d) nor IDENTITY (%d)", errBadValue, uint8(hash), c.BucketHashCRC32, c.BucketHashIdentity)
			}
			return b.dp.SetDispatchConfig(dataplane.DispatchConfig{
				Configured: true,
				GatewayIP:  ipv4(p[b.gwIPParam]),
				VMACBase:   mac(p[b.vmacParam]),
				BucketMask: mask,
				BucketHash: hash,
			})
		}
	}
	if isInitial {
		return nil
	}
	return errUnsupported
}

// setGroup programs a multicast group. The P4 program only ever replicates to
// HOST_FLOOD_GROUP, GATEWAY_OUTSIDE_FLOOD_GROUP and UPLINK_FLOOD_GROUP, so other groups
// are kept in the server's store only: the data plane has no use for them and a
// bounded group map.
func (b *binding) setGroup(id uint32, ports []uint16) error {
	if id != c.HostFloodGroup && id != c.GatewayOutsideFloodGroup && id != c.UplinkFloodGroup {
		return nil
	}
	return b.dp.SetFloodGroup(uint16(id), ports)
}

func (b *binding) directCounter(table uint32, match entryKey) (dataplane.Counter, error) {
	if d, ok := b.dispatch[table]; ok {
		return b.dp.DispatchCounter(d.table, d.key(match))
	}
	if table != b.buckets {
		return dataplane.Counter{}, errUnsupported
	}
	return b.dp.BucketCounter(u16(match.value(b.bucketsBucket)))
}

func (b *binding) setDirectCounter(table uint32, match entryKey, v dataplane.Counter) error {
	if d, ok := b.dispatch[table]; ok {
		return b.dp.SetDispatchCounter(d.table, d.key(match), v)
	}
	if table != b.buckets {
		return errUnsupported
	}
	return b.dp.SetBucketCounter(u16(match.value(b.bucketsBucket)), v)
}

func (b *binding) counter(id uint32, index int64) (dataplane.Counter, error) {
	if pc, ok := b.portCounters[id]; ok {
		return b.dp.PortCounter(pc, uint16(index))
	}
	if id != b.dropCounter {
		return dataplane.Counter{}, errUnsupported
	}
	return b.dp.DropCounter(uint16(index))
}

func (b *binding) setCounter(id uint32, index int64, v dataplane.Counter) error {
	if pc, ok := b.portCounters[id]; ok {
		return b.dp.SetPortCounter(pc, uint16(index), v)
	}
	if id != b.dropCounter {
		return errUnsupported
	}
	return b.dp.SetDropCounter(uint16(index), v)
}

func (b *binding) idle(table uint32, match entryKey) (time.Duration, error) {
	if table == b.learnedIP6s {
		return b.dp.LearnedIP6Idle(ipv6(match.value(b.learnedIP6sIP)), mac(match.value(b.learnedIP6sMAC)))
	}
	if table != b.learned {
		return 0, errUnsupported
	}
	return b.dp.LearnedIdle(mac(match.value(b.learnedMAC)), u16(match.value(b.learnedPort)))
}

// idleAll reads the last hits of a whole idle-timeout table at once; the
// function it returns answers as idle would for each stored entry of that
// table (and keeps the entry's data-plane key on it for the next scan).
func (b *binding) idleAll(table uint32) (func(*storedEntry) (time.Duration, error), error) {
	switch table {
	case b.learned:
		all, err := b.dp.LearnedIdleAll()
		return idleLookup(all, err, func(se *storedEntry) dataplane.LearnedKey {
			return dataplane.LearnedKey{MAC: mac(se.key.value(b.learnedMAC)), Port: u16(se.key.value(b.learnedPort))}
		})
	case b.learnedIP6s:
		all, err := b.dp.LearnedIP6IdleAll()
		return idleLookup(all, err, func(se *storedEntry) dataplane.LearnedIP6Key {
			return dataplane.LearnedIP6Key{IP: ipv6(se.key.value(b.learnedIP6sIP)), MAC: mac(se.key.value(b.learnedIP6sMAC))}
		})
	}
	return nil, errUnsupported
}

// idleLookup answers idleAll from one read of a table's last hits, all; keyOf turns a
// stored entry into the data plane's key, kept on the entry for the next scan.
func idleLookup[K comparable](all map[K]time.Duration, err error, keyOf func(*storedEntry) K) (func(*storedEntry) (time.Duration, error), error) {
	if err != nil {
		return nil, err
	}
	return func(se *storedEntry) (time.Duration, error) {
		k, ok := se.dpKey.(K)
		if !ok {
			k = keyOf(se)
			se.dpKey = k
		}
		d, ok := all[k]
		if !ok {
			return 0, fmt.Errorf("%+v: %w", k, dataplane.ErrNotFound)
		}
		return d, nil
	}, nil
}

// portRoleKey is the match of the port_roles entry for port, used to check
// that a packet-out egress port is configured.
func (b *binding) portRoleKey(port uint16) (uint32, entryKey) {
	return b.portRoles, exactKey(map[uint32][]byte{b.portRolesPort: fromUint(uint64(port))})
}

func bitstring(v []byte) *p4v1.P4Data {
	return &p4v1.P4Data{Data: &p4v1.P4Data_Bitstring{Bitstring: canonical(v)}}
}

// digestData turns a learn event into the learn_digest_t (or, for EventDigestIP6,
// learn_ip6_digest_t) struct, members in P4Info order.
func (b *binding) digestData(ev dataplane.Event) (uint32, *p4v1.P4Data) {
	if ev.Kind == dataplane.EventDigestIP6 {
		return b.learnIP6Digest, digestStruct(b.digestIP6Members, map[string][]byte{
			c.DigestLearnIP6DigestSrcMAC: ev.SrcMAC[:],
			c.DigestLearnIP6DigestPort:   fromUint(uint64(ev.Port)),
			c.DigestLearnIP6DigestSrcIP6: ev.SrcIP6[:],
		})
	}
	return b.learnDigest, digestStruct(b.digestMembers, map[string][]byte{
		c.DigestLearnDigestSrcMAC: ev.SrcMAC[:],
		c.DigestLearnDigestPort:   fromUint(uint64(ev.Port)),
		c.DigestLearnDigestSrcIP:  ev.SrcIP[:],
	})
}

// digestStruct is a digest's struct: the value of each member, in the P4Info's order.
func digestStruct(members []string, values map[string][]byte) *p4v1.P4Data {
	out := make([]*p4v1.P4Data, 0, len(members))
	for _, m := range members {
		out = append(out, bitstring(values[m]))
	}
	return &p4v1.P4Data{Data: &p4v1.P4Data_Struct{Struct: &p4v1.P4StructLike{Members: out}}}
}

func (b *binding) packetIn(ev dataplane.Event) *p4v1.PacketIn {
	return &p4v1.PacketIn{
		Payload: ev.Frame,
		Metadata: []*p4v1.PacketMetadata{
			{MetadataId: b.pktInIngressPort, Value: fromUint(uint64(ev.IngressPort))},
			{MetadataId: b.pktInReason, Value: fromUint(uint64(ev.Reason))},
		},
	}
}
