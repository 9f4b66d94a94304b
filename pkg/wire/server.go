package wire

import (
	"net/http"

	"golang.org/x/net/websocket"
)

// Upgrade turns an already authenticated upgrade request into a Conn and
// runs serve on it; the connection is closed when serve returns. It accepts
// clients without an Origin header (Workers are not browsers), which
// websocket.Handler would refuse. A request that is not a valid WebSocket
// handshake gets an HTTP error and serve is not called.
func Upgrade(w http.ResponseWriter, r *http.Request, serve func(*Conn)) {
	s := websocket.Server{
		Handshake: func(*websocket.Config, *http.Request) error { return nil },
		Handler:   func(ws *websocket.Conn) { serve(NewConn(ws)) },
	}
	s.ServeHTTP(w, r)
}
