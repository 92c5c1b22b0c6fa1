package main

import (
	"context"
	"net"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	v1reflectiongrpc "google.golang.org/grpc/reflection/grpc_reflection_v1"
	v1reflectionpb "google.golang.org/grpc/reflection/grpc_reflection_v1"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/descriptorpb"
)

// A client with no .proto (grpcurl) lists the server's services through
// reflection and gets Greeter's descriptor, with its three methods.
func TestReflectionDescribesTheService(t *testing.T) {
	srv, closeStore, err := newServer()
	if err != nil {
		t.Fatal(err)
	}
	defer closeStore()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(ln)
	defer srv.Stop()
	c, err := dial(ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	stream, err := v1reflectiongrpc.NewServerReflectionClient(c.ClientConn).ServerReflectionInfo(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	ask := func(req *v1reflectionpb.ServerReflectionRequest) *v1reflectionpb.ServerReflectionResponse {
		t.Helper()
		if err := stream.Send(req); err != nil {
			t.Fatal(err)
		}
		resp, err := stream.Recv()
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	var services []string
	for _, s := range ask(&v1reflectionpb.ServerReflectionRequest{MessageRequest: &v1reflectionpb.ServerReflectionRequest_ListServices{}}).GetListServicesResponse().GetService() {
		services = append(services, s.GetName())
	}
	if !slices.Contains(services, "demo.v1.Greeter") {
		t.Errorf("reflection lists %q, want demo.v1.Greeter among them", services)
	}
	resp := ask(&v1reflectionpb.ServerReflectionRequest{MessageRequest: &v1reflectionpb.ServerReflectionRequest_FileContainingSymbol{FileContainingSymbol: "demo.v1.Greeter"}})
	var methods []string
	for _, b := range resp.GetFileDescriptorResponse().GetFileDescriptorProto() {
		fd := new(descriptorpb.FileDescriptorProto)
		if err := proto.Unmarshal(b, fd); err != nil {
			t.Fatal(err)
		}
		for _, s := range fd.GetService() {
			for _, m := range s.GetMethod() {
				methods = append(methods, fd.GetPackage()+"."+s.GetName()+"/"+m.GetName())
			}
		}
	}
	if want := []string{"demo.v1.Greeter/Greet", "demo.v1.Greeter/Search", "demo.v1.Greeter/Count"}; !slices.Equal(methods, want) {
		t.Errorf("reflection describes methods %q, want %q (error: %v)", methods, want, resp.GetErrorResponse())
	}
}

// The shipped .proto and the descriptor the server reflects say the same:
// package, import and each rpc with its types and streaming.
func TestProtoFileMatchesTheDescriptor(t *testing.T) {
	src, err := os.ReadFile("proto/greeter.proto")
	if err != nil {
		t.Fatal(err)
	}
	text := string(src)
	for _, want := range []string{"package " + protoFile.GetPackage() + ";", `import "` + protoFile.GetDependency()[0] + `";`,
		`option go_package = "` + protoFile.GetOptions().GetGoPackage() + `";`, "service " + protoFile.GetService()[0].GetName() + " {"} {
		if !strings.Contains(text, want) {
			t.Errorf("proto/greeter.proto lacks %q", want)
		}
	}
	rpc := regexp.MustCompile(`rpc (\w+)\(([\w.]+)\) returns \((stream )?([\w.]+)\);`)
	var got, want []string
	for _, m := range rpc.FindAllStringSubmatch(text, -1) {
		got = append(got, m[1]+"("+m[2]+") "+m[3]+m[4])
	}
	for _, m := range protoFile.GetService()[0].GetMethod() {
		stream := ""
		if m.GetServerStreaming() {
			stream = "stream "
		}
		want = append(want, m.GetName()+"("+strings.TrimPrefix(m.GetInputType(), ".")+") "+stream+strings.TrimPrefix(m.GetOutputType(), "."))
	}
	if !slices.Equal(got, want) {
		t.Errorf("proto/greeter.proto's rpcs %q, want the descriptor's %q", got, want)
	}
}
