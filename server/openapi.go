package server

import _ "embed"

// OpenAPI is the gateway's OpenAPI 3 description, served at /openapi.yaml.
// docs/openapi.yaml is a copy that a test keeps equal.
//
//go:embed openapi.yaml
var OpenAPI []byte
