package server

import (
	"encoding/json"
	"net/http"
)

// serveStats answers kubelet's /stats/summary with the node's last
// measure.
func (s *Server) serveStats(w http.ResponseWriter, _ *http.Request) {
	sum := s.node.Stats()
	if sum == nil {
		http.Error(w, "no measure yet", http.StatusServiceUnavailable)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(sum)
}
