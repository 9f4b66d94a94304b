package plugin

// The environment variables through which the Worker hands an attempt's
// plugin the model gateway (pkg/gateway, DECISIONS 19): the gateway's
// base URL (http://127.0.0.1:PORT; provider ID's API is under
// URL/ID), the attempt's credential, which the agent presents as its
// API key and which is refused once the attempt's lease ends, and the
// providers it serves ("ID=KIND,...", gateway.ParseOffer), from which an
// agent plugin picks its agent's. No provider key is ever in a plugin's
// environment.
const (
	EnvGatewayURL       = "FORGE_GATEWAY_URL"
	EnvGatewayToken     = "FORGE_GATEWAY_TOKEN"
	EnvGatewayProviders = "FORGE_GATEWAY_PROVIDERS"
)

// GatewayEnv lists the three.
var GatewayEnv = []string{EnvGatewayURL, EnvGatewayToken, EnvGatewayProviders}
