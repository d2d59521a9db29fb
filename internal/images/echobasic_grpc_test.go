package images

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/descriptorpb"
	"google.golang.org/protobuf/types/dynamicpb"
)

const grpcEchoPackage = "gateway_api_conformance.echo_basic.grpcecho"

// grpcEchoProto is the suite's grpcecho.proto as a descriptor, written
// down from the .proto: the tests call the server with protobuf's own
// codec and messages built from it, as the suite's generated client
// does, independently of the server's hand-written codec.
func grpcEchoProto(t *testing.T) protoreflect.FileDescriptor {
	t.Helper()
	field := func(name string, num int32, repeated bool, message string) *descriptorpb.FieldDescriptorProto {
		f := &descriptorpb.FieldDescriptorProto{
			Name:   proto.String(name),
			Number: proto.Int32(num),
			Label:  descriptorpb.FieldDescriptorProto_LABEL_OPTIONAL.Enum(),
			Type:   descriptorpb.FieldDescriptorProto_TYPE_STRING.Enum(),
		}
		if repeated {
			f.Label = descriptorpb.FieldDescriptorProto_LABEL_REPEATED.Enum()
		}
		if message != "" {
			f.Type = descriptorpb.FieldDescriptorProto_TYPE_MESSAGE.Enum()
			f.TypeName = proto.String("." + grpcEchoPackage + "." + message)
		}
		return f
	}
	message := func(name string, fields ...*descriptorpb.FieldDescriptorProto) *descriptorpb.DescriptorProto {
		return &descriptorpb.DescriptorProto{Name: proto.String(name), Field: fields}
	}
	method := func(name string) *descriptorpb.MethodDescriptorProto {
		return &descriptorpb.MethodDescriptorProto{Name: proto.String(name),
			InputType: proto.String("." + grpcEchoPackage + ".EchoRequest"), OutputType: proto.String("." + grpcEchoPackage + ".EchoResponse")}
	}
	fd, err := protodesc.NewFile(&descriptorpb.FileDescriptorProto{
		Name:    proto.String("grpcecho.proto"),
		Package: proto.String(grpcEchoPackage),
		Syntax:  proto.String("proto3"),
		MessageType: []*descriptorpb.DescriptorProto{
			message("Header", field("key", 1, false, ""), field("value", 2, false, "")),
			message("Context", field("namespace", 1, false, ""), field("ingress", 2, false, ""), field("service_name", 3, false, ""), field("pod", 4, false, "")),
			message("TLSAssertions", field("version", 1, false, ""), field("negotiated_protocol", 2, false, ""), field("server_name", 3, false, ""),
				field("cipher_suite", 4, false, ""), field("peer_certificates", 5, true, "")),
			message("Assertions", field("fully_qualified_method", 1, false, ""), field("headers", 2, true, "Header"), field("authority", 3, false, ""),
				field("context", 4, false, "Context"), field("tls_assertions", 5, false, "TLSAssertions")),
			message("EchoRequest"),
			message("EchoResponse", field("assertions", 1, false, "Assertions"), field("request", 2, false, "EchoRequest")),
		},
		Service: []*descriptorpb.ServiceDescriptorProto{{Name: proto.String("GrpcEcho"),
			Method: []*descriptorpb.MethodDescriptorProto{method("Echo"), method("EchoTwo"), method("EchoThree")}}},
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return fd
}

// grpcEchoAnswer is an EchoResponse in protobuf's JSON mapping.
type grpcEchoAnswer struct {
	Assertions struct {
		FullyQualifiedMethod string `json:"fullyQualifiedMethod"`
		Headers              []struct {
			Key   string `json:"key"`
			Value string `json:"value"`
		} `json:"headers"`
		Authority string `json:"authority"`
		Context   struct {
			Namespace   string `json:"namespace"`
			Ingress     string `json:"ingress"`
			ServiceName string `json:"serviceName"`
			Pod         string `json:"pod"`
		} `json:"context"`
		TLSAssertions *struct {
			Version            string   `json:"version"`
			NegotiatedProtocol string   `json:"negotiatedProtocol"`
			ServerName         string   `json:"serverName"`
			CipherSuite        string   `json:"cipherSuite"`
			PeerCertificates   []string `json:"peerCertificates"`
		} `json:"tlsAssertions"`
	} `json:"assertions"`
}

func (a *grpcEchoAnswer) header(k string) []string {
	var out []string
	for _, h := range a.Assertions.Headers {
		if h.Key == k {
			out = append(out, h.Value)
		}
	}
	return out
}

// TestEchoBasicGRPC: the GrpcEcho service, as the suite's GRPCRoute
// tests call it.
func TestEchoBasicGRPC(t *testing.T) {
	pki := newTestPKI(t)
	fd := grpcEchoProto(t)
	addrs, _ := startEchoBasic(t, echoBasicEnv("GRPC_ECHO_SERVER", "1", "TLS_SERVER_CERT", pki.certFile, "TLS_SERVER_PRIV_KEY", pki.keyFile), "grpc", "grpc-tls")
	dial := func(addr string, opts ...grpc.DialOption) *grpc.ClientConn {
		conn, err := grpc.NewClient(addr, opts...)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { conn.Close() })
		return conn
	}
	plain := dial(addrs["grpc"], grpc.WithTransportCredentials(insecure.NewCredentials()), grpc.WithAuthority("grpc.example.com"))
	secure := dial(addrs["grpc-tls"], grpc.WithTransportCredentials(credentials.NewTLS(pki.clientConfig())))
	for _, tc := range []struct {
		name          string
		conn          *grpc.ClientConn
		method        string
		metadata      map[string]string
		wantCode      codes.Code
		wantAuthority string
		wantTLS       bool
	}{
		{name: "Echo", conn: plain, method: "Echo", metadata: map[string]string{"x-jitter": "42"}, wantAuthority: "grpc.example.com"},
		{name: "EchoTwo", conn: plain, method: "EchoTwo", wantAuthority: "grpc.example.com"},
		{name: "EchoThree is unimplemented", conn: plain, method: "EchoThree", wantCode: codes.Unimplemented},
		{name: "Echo over TLS", conn: secure, method: "Echo", metadata: map[string]string{"x-jitter": "7"}, wantAuthority: "abc.example.com", wantTLS: true}, // the TLS server name,
		{name: "EchoThree over TLS", conn: secure, method: "EchoThree", wantCode: codes.Unimplemented},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			ctx = metadata.NewOutgoingContext(ctx, metadata.New(tc.metadata))
			fullMethod := "/" + grpcEchoPackage + ".GrpcEcho/" + tc.method
			resp := dynamicpb.NewMessage(fd.Messages().ByName("EchoResponse"))
			err := tc.conn.Invoke(ctx, fullMethod, dynamicpb.NewMessage(fd.Messages().ByName("EchoRequest")), resp)
			if got := status.Code(err); got != tc.wantCode {
				t.Fatalf("code %v (%v), want %v", got, err, tc.wantCode)
			}
			if err != nil {
				return
			}
			js, err := protojson.Marshal(resp)
			if err != nil {
				t.Fatal(err)
			}
			var a grpcEchoAnswer
			if err := json.Unmarshal(js, &a); err != nil {
				t.Fatal(err)
			}
			as := a.Assertions
			if as.FullyQualifiedMethod != fullMethod || as.Authority != tc.wantAuthority {
				t.Errorf("method %q authority %q, want %q %q", as.FullyQualifiedMethod, as.Authority, fullMethod, tc.wantAuthority)
			}
			if c := as.Context; c.Namespace != "gateway-conformance-infra" || c.Pod != "infra-backend-v1-abc-123" || c.ServiceName != "infra-backend-v1" {
				t.Errorf("context %+v", c)
			}
			for k, v := range tc.metadata {
				if got := a.header(k); !slices.Equal(got, []string{v}) {
					t.Errorf("header %s = %q, want %q", k, got, v)
				}
			}
			if got := a.header(":authority"); !slices.Equal(got, []string{tc.wantAuthority}) {
				t.Errorf("header :authority = %q", got)
			}
			if !tc.wantTLS {
				if as.TLSAssertions != nil {
					t.Errorf("plaintext call with TLS %+v", as.TLSAssertions)
				}
				return
			}
			if s := as.TLSAssertions; s == nil || s.Version != "TLSv1.3" || s.ServerName != "abc.example.com" || s.NegotiatedProtocol != "h2" || !strings.HasPrefix(s.CipherSuite, "TLS_") {
				t.Errorf("TLS %+v", s)
			}
		})
	}
}

// TestGRPCEchoCodec: requests' fields, none of which the server knows,
// are skipped when well-formed.
func TestGRPCEchoCodec(t *testing.T) {
	for _, tc := range []struct {
		name    string
		data    []byte
		wantErr bool
	}{
		{"empty", nil, false},
		{"unknown varint field", []byte{0x08, 0x96, 0x01}, false},
		{"unknown string field", []byte{0x12, 0x02, 'h', 'i'}, false},
		{"truncated string", []byte{0x12, 0x05, 'h'}, true},
		{"field number 0", []byte{0x00, 0x01}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := grpcEchoCodec{}.Unmarshal(tc.data, &grpcEchoRequest{})
			if (err != nil) != tc.wantErr {
				t.Errorf("Unmarshal(%x) = %v, want error %v", tc.data, err, tc.wantErr)
			}
		})
	}
	if _, err := (grpcEchoCodec{}).Marshal(&grpcEchoRequest{}); err == nil {
		t.Error("Marshal of a request, which the server never sends: no error")
	}
}
