package images

import (
	"fmt"

	"google.golang.org/protobuf/encoding/protowire"
)

// The messages of the gRPC echo, in protobuf's wire format, written with
// protowire: there is no protoc here to generate their code, and only
// two cross the wire. The field numbers are those of grpcecho.proto:
//
//	EchoRequest   {}
//	EchoResponse  {Assertions assertions = 1; EchoRequest request = 2}
//	Assertions    {string fully_qualified_method = 1; repeated Header headers = 2;
//	               string authority = 3; Context context = 4; TLSAssertions tls_assertions = 5}
//	Header        {string key = 1; string value = 2}
//	Context       {string namespace = 1; string ingress = 2; string service_name = 3; string pod = 4}
//	TLSAssertions {string version = 1; string negotiated_protocol = 2; string server_name = 3;
//	               string cipher_suite = 4; repeated string peer_certificates = 5}
//
// The server never sets EchoResponse.request.

// grpcEchoRequest is an EchoRequest.
type grpcEchoRequest struct{}

// grpcEchoResponse is an EchoResponse.
type grpcEchoResponse struct {
	assertions grpcEchoAssertions
}

type grpcEchoAssertions struct {
	method    string
	headers   [][2]string // key, value
	authority string
	pod       echoBasicPod
	tls       *grpcEchoTLS
}

type grpcEchoTLS struct {
	version, negotiatedProtocol, serverName, cipherSuite string
	peerCertificates                                     []string
}

func (r *grpcEchoResponse) marshal() []byte {
	return appendProtoMessage(nil, 1, r.assertions.marshal())
}

func (a *grpcEchoAssertions) marshal() []byte {
	b := appendProtoString(nil, 1, a.method)
	for _, h := range a.headers {
		b = appendProtoMessage(b, 2, appendProtoString(appendProtoString(nil, 1, h[0]), 2, h[1]))
	}
	b = appendProtoString(b, 3, a.authority)
	var c []byte
	c = appendProtoString(c, 1, a.pod.Namespace)
	c = appendProtoString(c, 2, a.pod.Ingress)
	c = appendProtoString(c, 3, a.pod.Service)
	c = appendProtoString(c, 4, a.pod.Pod)
	b = appendProtoMessage(b, 4, c)
	if t := a.tls; t != nil {
		var m []byte
		m = appendProtoString(m, 1, t.version)
		m = appendProtoString(m, 2, t.negotiatedProtocol)
		m = appendProtoString(m, 3, t.serverName)
		m = appendProtoString(m, 4, t.cipherSuite)
		for _, pem := range t.peerCertificates {
			m = protowire.AppendTag(m, 5, protowire.BytesType)
			m = protowire.AppendString(m, pem)
		}
		b = appendProtoMessage(b, 5, m)
	}
	return b
}

// appendProtoString appends a singular string field; proto3 leaves out
// the empty string.
func appendProtoString(b []byte, num protowire.Number, s string) []byte {
	if s == "" {
		return b
	}
	b = protowire.AppendTag(b, num, protowire.BytesType)
	return protowire.AppendString(b, s)
}

// appendProtoMessage appends an embedded message field (present even
// when empty).
func appendProtoMessage(b []byte, num protowire.Number, m []byte) []byte {
	b = protowire.AppendTag(b, num, protowire.BytesType)
	return protowire.AppendBytes(b, m)
}

// grpcEchoCodec stands for gRPC's "proto" codec on the echo servers: it
// writes EchoResponses and reads EchoRequests, whose fields (none known)
// it checks for well-formedness and skips.
type grpcEchoCodec struct{}

func (grpcEchoCodec) Name() string { return "proto" }

func (grpcEchoCodec) Marshal(v any) ([]byte, error) {
	if r, ok := v.(*grpcEchoResponse); ok {
		return r.marshal(), nil
	}
	return nil, fmt.Errorf("grpcecho: cannot marshal a %T", v)
}

func (grpcEchoCodec) Unmarshal(data []byte, v any) error {
	if _, ok := v.(*grpcEchoRequest); !ok {
		return fmt.Errorf("grpcecho: cannot unmarshal into a %T", v)
	}
	for len(data) > 0 {
		_, _, n := protowire.ConsumeField(data)
		if n < 0 {
			return fmt.Errorf("grpcecho: EchoRequest: %w", protowire.ParseError(n))
		}
		data = data[n:]
	}
	return nil
}
