package images

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// dial is netexec's /dial: it sends ?request= to ?host=:?port= ?tries=
// times (1) over ?protocol= (http: GET /REQUEST; udp: one datagram and
// one back), each try within 5 s (the environment's dialTimeout), and
// answers {"responses":[…],"errors":[…]}, status 200. As agnhost's, the
// responses are left out when the last try got no answer (or an empty
// one), and each list when it is empty. Bad parameters get a 400.
func (n *netexec) dial(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	host, port, request, protocol, triesArg := q.Get("host"), q.Get("port"), q.Get("request"), q.Get("protocol"), q.Get("tries")
	n.log.Printf("GET /dial?host=%s&protocol=%s&port=%s&request=%s&tries=%s", host, protocol, port, request, triesArg)
	tries := 1
	if triesArg != "" {
		t, err := strconv.Atoi(triesArg)
		if err != nil {
			http.Error(w, fmt.Sprintf("tries parameter is invalid. %v", err), http.StatusBadRequest)
			return
		}
		tries = t
	}
	if request == "" {
		http.Error(w, "request parameter not specified. <nil>", http.StatusBadRequest)
		return
	}
	target := net.JoinHostPort(host, port)
	var send func(request string, to net.Addr) (string, error)
	var to net.Addr
	var err error
	switch strings.ToLower(protocol) {
	case "", "http":
		send = n.dialHTTP
		to, err = net.ResolveTCPAddr("tcp", target)
	case "udp":
		send = n.dialUDP
		to, err = net.ResolveUDPAddr("udp", target)
	case "sctp":
		send = dialSCTP
		to, err = net.ResolveTCPAddr("tcp", target)
	default:
		http.Error(w, fmt.Sprintf("unsupported protocol. %s", protocol), http.StatusBadRequest)
		return
	}
	if err != nil {
		http.Error(w, fmt.Sprintf("host and/or port param are invalid. %v", err), http.StatusBadRequest)
		return
	}

	responses, errs := []string{}, []string{}
	var last string
	for range tries {
		last, err = send(request, to)
		if err != nil {
			errs = append(errs, err.Error())
		} else {
			responses = append(responses, last)
		}
	}
	out := map[string][]string{}
	if last != "" {
		out["responses"] = responses
	}
	if len(errs) > 0 {
		out["errors"] = errs
	}
	b, err := json.Marshal(out)
	if err != nil {
		http.Error(w, fmt.Sprintf("response could not be serialized. %v", err), http.StatusExpectationFailed)
		return
	}
	w.Write(b)
}

// dialHTTP GETs /REQUEST of to and returns the body, whatever the
// status.
func (n *netexec) dialHTTP(request string, to net.Addr) (string, error) {
	transport := &http.Transport{
		Proxy:               http.ProxyFromEnvironment,
		TLSHandshakeTimeout: 10 * time.Second,
		IdleConnTimeout:     90 * time.Second,
		MaxIdleConnsPerHost: 25,
	}
	defer transport.CloseIdleConnections()
	client := &http.Client{Transport: transport, Timeout: n.env.dialTimeout}
	resp, err := client.Get(fmt.Sprintf("http://%s/%s", to, request))
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return "", err
	}
	return string(body), nil
}

// dialUDP sends request in one datagram and waits for one in return.
func (n *netexec) dialUDP(request string, to net.Addr) (string, error) {
	c, err := net.DialUDP("udp", nil, to.(*net.UDPAddr))
	if err != nil {
		return "", fmt.Errorf("udp dial failed. err:%v", err)
	}
	defer c.Close()
	if _, err := c.Write([]byte(request)); err != nil {
		return "", fmt.Errorf("udp connection write failed. err:%v", err)
	}
	buf := make([]byte, 2048)
	c.SetReadDeadline(time.Now().Add(n.env.dialTimeout))
	size, err := c.Read(buf)
	if err != nil || size == 0 {
		return "", fmt.Errorf("reading from udp connection failed. err:'%v'", err)
	}
	return string(buf[:size]), nil
}

func dialSCTP(string, net.Addr) (string, error) {
	return "", fmt.Errorf("sctp dial failed. err:%v", errSCTP)
}
