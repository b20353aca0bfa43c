package p4rt

import (
	"errors"
	"fmt"
	"io"
	"slices"
	"sync"

	p4v1 "github.com/p4lang/p4runtime/go/p4/v1"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// StreamChannel implements p4.v1.P4Runtime: arbitration, packet-out,
// digest acks in; arbitration updates, packet-ins, digests, idle timeout
// notifications and stream errors out.
func (s *Server) StreamChannel(stream p4v1.P4Runtime_StreamChannelServer) error {
	c := newConn()
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			case m := <-c.out:
				if err := stream.Send(m); err != nil {
					return
				}
			}
		}
	}()
	defer func() {
		s.arb.remove(c)
		close(stop)
		wg.Wait()
		// Deliver what is still queued (e.g. the last arbitration update).
		for {
			select {
			case m := <-c.out:
				if stream.Send(m) != nil {
					return
				}
			default:
				return
			}
		}
	}()
	for {
		req, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		switch u := req.GetUpdate().(type) {
		case *p4v1.StreamMessageRequest_Arbitration:
			if err := s.handleArbitration(c, u.Arbitration); err != nil {
				return err
			}
		case *p4v1.StreamMessageRequest_Packet:
			s.handlePacketOut(c, u.Packet)
		case *p4v1.StreamMessageRequest_DigestAck:
			s.handleDigestAck(c, u.DigestAck)
		default:
			send(c, streamError(codes.Unimplemented, "unsupported stream message", nil))
		}
	}
}

func (s *Server) handleArbitration(c *conn, m *p4v1.MasterArbitrationUpdate) error {
	if err := s.checkDevice(m.GetDeviceId()); err != nil {
		return err
	}
	if r := m.GetRole(); r.GetName() != "" || r.GetId() != 0 || r.GetConfig() != nil {
		return status.Error(codes.Unimplemented, "roles are not supported: use the default role")
	}
	return s.arb.update(c, m.GetElectionId())
}

func streamError(code codes.Code, msg string, po *p4v1.PacketOut) *p4v1.StreamMessageResponse {
	se := &p4v1.StreamError{CanonicalCode: int32(code), Message: msg}
	if po != nil {
		se.Details = &p4v1.StreamError_PacketOut{PacketOut: &p4v1.PacketOutError{PacketOut: po}}
	}
	return &p4v1.StreamMessageResponse{Update: &p4v1.StreamMessageResponse_Error{Error: se}}
}

func (s *Server) handlePacketOut(c *conn, po *p4v1.PacketOut) {
	fail := func(code codes.Code, msg string) {
		s.log.Debug("packet-out rejected", "reason", msg)
		send(c, streamError(code, msg, po))
	}
	if !s.arb.isPrimary(c) {
		fail(codes.PermissionDenied, "packet-out rejected: only the primary controller may send packets")
		return
	}
	if !s.pipelineSet() {
		fail(codes.FailedPrecondition, "packet-out rejected: no forwarding pipeline config set")
		return
	}
	var port []byte
	for _, md := range po.GetMetadata() {
		if md.GetMetadataId() != s.bind.pktOutEgressPort {
			fail(codes.InvalidArgument, fmt.Sprintf("packet-out rejected: unknown packet_out metadata id %d", md.GetMetadataId()))
			return
		}
		if port != nil {
			fail(codes.InvalidArgument, "packet-out rejected: egress_port given twice")
			return
		}
		port = md.GetValue()
	}
	if len(port) == 0 {
		fail(codes.InvalidArgument, "packet-out rejected: metadata egress_port is missing")
		return
	}
	if !fits(port, s.bind.pktOutPortWidth) {
		fail(codes.InvalidArgument, fmt.Sprintf("packet-out rejected: egress_port does not fit in %d bits", s.bind.pktOutPortWidth))
		return
	}
	p := u16(port)
	if !s.packetOutPortOK(p) {
		if err := s.dp.CountDrop(dropPacketOutBadPort, s.bind.pktOutHeaderBytes+len(po.GetPayload())); err != nil {
			s.log.Warn("count packet-out drop", "err", err)
		}
		fail(codes.InvalidArgument, fmt.Sprintf("packet-out dropped: egress_port %d is not a configured front port (PACKET_OUT_BAD_PORT)", p))
		return
	}
	if err := s.dp.Transmit(p, po.GetPayload()); err != nil {
		fail(codes.Internal, "packet-out failed: "+err.Error())
	}
}

// packetOutPortOK mirrors the P4 program: the port must have a port_roles
// entry, and here it must also be one of the switch's interfaces.
func (s *Server) packetOutPortOK(port uint16) bool {
	if !slices.Contains(s.dp.Ports(), port) {
		return false
	}
	tid, key := s.bind.portRoleKey(port)
	s.mu.Lock()
	defer s.mu.Unlock()
	_, ok := s.tables[tid][matchString(key)]
	return ok
}

func (s *Server) handleDigestAck(c *conn, ack *p4v1.DigestListAck) {
	if !s.arb.isPrimary(c) {
		send(c, &p4v1.StreamMessageResponse{Update: &p4v1.StreamMessageResponse_Error{Error: &p4v1.StreamError{
			CanonicalCode: int32(codes.PermissionDenied),
			Message:       "digest ack ignored: only the primary controller may ack",
			Details:       &p4v1.StreamError_DigestListAck{DigestListAck: &p4v1.DigestListAckError{DigestListAck: ack}},
		}}})
		return
	}
	if _, ok := s.sch.digests[ack.GetDigestId()]; !ok {
		send(c, &p4v1.StreamMessageResponse{Update: &p4v1.StreamMessageResponse_Error{Error: &p4v1.StreamError{
			CanonicalCode: int32(codes.InvalidArgument),
			Message:       fmt.Sprintf("digest ack for unknown digest id %d", ack.GetDigestId()),
			Details:       &p4v1.StreamError_DigestListAck{DigestListAck: &p4v1.DigestListAckError{DigestListAck: ack}},
		}}})
		return
	}
	s.digests.ack(ack.GetDigestId(), ack.GetListId())
}
