// Command hostnames answers every HTTP request on port 9376 with its
// host's name: the reference scenario's server, built by TestPulledImage
// into an image of its own (a static binary, nothing else).
package main

import (
	"fmt"
	"log"
	"net/http"
	"os"
	"time"
)

func main() {
	name, err := os.Hostname()
	if err != nil {
		log.Fatal(err)
	}
	srv := &http.Server{Addr: ":9376", ReadHeaderTimeout: 10 * time.Second,
		Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, name) })}
	log.Fatal(srv.ListenAndServe())
}
