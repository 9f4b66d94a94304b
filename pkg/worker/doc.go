// Package worker is the Worker side of Agent Forge: its configuration, its
// lanes (one outbound WebSocket per concurrency slot), lease execution and
// the mapping from plugin outcomes to attempt results.
package worker
