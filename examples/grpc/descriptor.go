package main

import (
	"google.golang.org/grpc"
	"google.golang.org/grpc/reflection"
	v1reflectiongrpc "google.golang.org/grpc/reflection/grpc_reflection_v1"
	v1alphareflectiongrpc "google.golang.org/grpc/reflection/grpc_reflection_v1alpha"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/types/descriptorpb"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// protoFile is proto/greeter.proto as a descriptor, written out here (what
// protoc would generate) so that the example builds without protoc;
// TestProtoFileMatchesTheDescriptor holds the two equal.
var protoFile = &descriptorpb.FileDescriptorProto{
	Name:       proto.String("greeter.proto"),
	Package:    proto.String("demo.v1"),
	Dependency: []string{"google/protobuf/wrappers.proto"},
	Syntax:     proto.String("proto3"),
	Options:    &descriptorpb.FileOptions{GoPackage: proto.String("github.com/tollgate/tollgate/examples/grpc;main")},
	Service: []*descriptorpb.ServiceDescriptorProto{{
		Name: proto.String("Greeter"),
		Method: []*descriptorpb.MethodDescriptorProto{
			{Name: proto.String("Greet"), InputType: proto.String(".google.protobuf.StringValue"), OutputType: proto.String(".google.protobuf.StringValue")},
			{Name: proto.String("Search"), InputType: proto.String(".google.protobuf.StringValue"), OutputType: proto.String(".google.protobuf.StringValue")},
			{Name: proto.String("Count"), InputType: proto.String(".google.protobuf.Int64Value"), OutputType: proto.String(".google.protobuf.Int64Value"), ServerStreaming: proto.Bool(true)},
		},
	}},
}

// registerReflection serves gRPC server reflection (v1, and v1alpha for
// older clients) on srv, so that grpcurl and other tools list and call
// its services without a .proto: from srv's services, described by
// protoFile and the well-known types it imports.
func registerReflection(srv *grpc.Server) error {
	files := new(protoregistry.Files)
	if err := files.RegisterFile(wrapperspb.File_google_protobuf_wrappers_proto); err != nil {
		return err
	}
	fd, err := protodesc.NewFile(protoFile, files)
	if err != nil {
		return err
	}
	if err := files.RegisterFile(fd); err != nil {
		return err
	}
	opts := reflection.ServerOptions{Services: srv, DescriptorResolver: files, ExtensionResolver: protoregistry.GlobalTypes}
	v1reflectiongrpc.RegisterServerReflectionServer(srv, reflection.NewServerV1(opts))
	v1alphareflectiongrpc.RegisterServerReflectionServer(srv, reflection.NewServer(opts))
	return nil
}
