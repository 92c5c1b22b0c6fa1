module github.com/tollgate/tollgate/rules

go 1.25.0

require (
	github.com/tollgate/tollgate v0.0.0
	go.yaml.in/yaml/v3 v3.0.5
)

replace github.com/tollgate/tollgate => ../
