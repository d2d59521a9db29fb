package images

import (
	"context"
	"crypto/tls"
	"errors"
	"maps"
	"net"
	"slices"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
)

// echo-basic's gRPC server (GRPC_ECHO_SERVER set): the service GrpcEcho
// of the suite's grpcecho.proto (package
// gateway_api_conformance.echo_basic.grpcecho) on HTTP_PORT (3000) in
// plaintext, and on HTTPS_PORT (8443) over TLS when TLS_SERVER_CERT and
// TLS_SERVER_PRIV_KEY name its files. Echo and EchoTwo answer with the
// call as the server saw it: its full method name (which the suite
// compares), its metadata and :authority, the pod and, over TLS, the
// connection. EchoThree is left unimplemented, as the suite expects
// (status Unimplemented). There is no reflection service; the suite does
// not use it. The messages are in echobasic_grpcwire.go.

const grpcEchoService = "gateway_api_conformance.echo_basic.grpcecho.GrpcEcho"

// grpcEchoDesc declares the service by hand, as protoc-gen-go-grpc
// would have from grpcecho.proto.
var grpcEchoDesc = grpc.ServiceDesc{
	ServiceName: grpcEchoService,
	HandlerType: (*any)(nil),
	Methods: []grpc.MethodDesc{
		{MethodName: "Echo", Handler: grpcEchoMethod("Echo")},
		{MethodName: "EchoTwo", Handler: grpcEchoMethod("EchoTwo")},
	},
	Metadata: "grpcecho.proto",
}

func (e *echoBasic) serveGRPC(ctx context.Context) error {
	httpPort, err := e.port("HTTP_PORT", "3000")
	if err != nil {
		return err
	}
	httpsPort, err := e.port("HTTPS_PORT", "8443")
	if err != nil {
		return err
	}
	// Not TLS_SERVER_PRIVKEY as for HTTPS: echo-basic's gRPC server
	// reads this name.
	cert, err := e.keyPair("TLS_SERVER_CERT", "TLS_SERVER_PRIV_KEY")
	if err != nil {
		return err
	}
	pod := e.pod()
	l, err := e.listen(ctx, "grpc", httpPort)
	if err != nil {
		return err
	}
	plain := grpc.NewServer(grpc.ForceServerCodec(grpcEchoCodec{}))
	plain.RegisterService(&grpcEchoDesc, &grpcEcho{e: e, pod: pod})
	serves := []func(context.Context) error{func(ctx context.Context) error { return serveGRPCServer(ctx, plain, l) }}
	if cert != nil {
		tl, err := e.listen(ctx, "grpc-tls", httpsPort)
		if err != nil {
			l.Close()
			return err
		}
		creds := credentials.NewTLS(&tls.Config{Certificates: []tls.Certificate{*cert}})
		secure := grpc.NewServer(grpc.ForceServerCodec(grpcEchoCodec{}), grpc.Creds(creds))
		secure.RegisterService(&grpcEchoDesc, &grpcEcho{e: e, pod: pod, tls: true})
		serves = append(serves, func(ctx context.Context) error { return serveGRPCServer(ctx, secure, tl) })
	}
	return serveAll(ctx, serves...)
}

// serveGRPCServer serves l with s until ctx ends.
func serveGRPCServer(ctx context.Context, s *grpc.Server, l net.Listener) error {
	stop := context.AfterFunc(ctx, s.Stop)
	defer stop()
	err := s.Serve(l)
	if ctx.Err() != nil {
		s.Stop() // returns once the connections are closed
		return nil
	}
	return err
}

// grpcEcho is the service of one server, plaintext or TLS.
type grpcEcho struct {
	e   *echoBasic
	pod echoBasicPod
	tls bool
}

// grpcEchoMethod handles a call of method. The servers install no
// interceptors.
func grpcEchoMethod(method string) grpc.MethodHandler {
	return func(srv any, ctx context.Context, dec func(any) error, _ grpc.UnaryServerInterceptor) (any, error) {
		if err := dec(&grpcEchoRequest{}); err != nil {
			return nil, err
		}
		return srv.(*grpcEcho).echo(ctx, method)
	}
}

func (g *grpcEcho) echo(ctx context.Context, method string) (*grpcEchoResponse, error) {
	a := grpcEchoAssertions{method: "/" + grpcEchoService + "/" + method, pod: g.pod}
	md, _ := metadata.FromIncomingContext(ctx)
	for _, k := range slices.Sorted(maps.Keys(md)) {
		for _, v := range md[k] {
			if k == ":authority" {
				a.authority = v
			}
			a.headers = append(a.headers, [2]string{k, v})
		}
	}
	if g.tls {
		var info credentials.TLSInfo
		p, ok := peer.FromContext(ctx)
		if ok {
			info, ok = p.AuthInfo.(credentials.TLSInfo)
		}
		if !ok {
			return nil, errors.New("grpcecho: the call has no TLS connection")
		}
		s := info.State
		a.tls = &grpcEchoTLS{
			version:            echoBasicTLSVersion(s.Version),
			negotiatedProtocol: s.NegotiatedProtocol,
			serverName:         s.ServerName,
			cipherSuite:        tls.CipherSuiteName(s.CipherSuite),
			peerCertificates:   pemCertificates(s.PeerCertificates),
		}
	}
	g.e.logf("gRPC %s (authority %q) over %s", a.method, a.authority, map[bool]string{false: "plaintext", true: "TLS"}[g.tls])
	return &grpcEchoResponse{assertions: a}, nil
}
