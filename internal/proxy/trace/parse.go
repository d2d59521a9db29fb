// Package trace walks a packet through iptables rules as the kernel
// would, printing each chain and matching rule, the endpoints the packet
// may reach with their probabilities, and whether it is masqueraded. It
// reads iptables-save output (or iptables-restore input) and understands
// the matches and targets the proxy modes use; a rule using anything else
// is reported, not guessed at.
package trace

import (
	"bufio"
	"bytes"
	"fmt"
	"net/netip"
	"strconv"
	"strings"

	"github.com/svcnet/svcnet/internal/iptables"
)

// Ruleset is a parsed dump of one or more tables.
type Ruleset struct {
	Tables map[string]*Table
}

// Table is one table of a dump.
type Table struct {
	Name   string
	Chains map[string]*Chain
}

// Chain is a chain with its rules; Policy is empty for user chains.
type Chain struct {
	Name   string
	Policy string
	Rules  []*Rule
}

// Rule is one rule with the matches and target the walker evaluates.
type Rule struct {
	Chain string
	Num   int    // 1-based position in the chain
	Text  string // as written in the dump

	src, dst             *addrMatch
	proto                string
	protoNeg             bool
	sport, dport         *portMatch
	srcType, dstType     *typeMatch
	probability          float64 // -1 without -m statistic
	recent               *recentMatch
	mark                 *markMatch
	ctstate              *stateMatch
	Comment              string
	Unsupported          []string // what the walker cannot evaluate
	Target               string
	Goto                 bool
	toDestination        string
	toPorts              string // REDIRECT
	orMark, xorMark      uint32
	setMark, setMarkMask uint32
	hasSetMark           bool
}

type addrMatch struct {
	prefix netip.Prefix
	neg    bool
}

type portMatch struct {
	lo, hi uint16
	neg    bool
}

type typeMatch struct {
	typ string
	neg bool
}

type recentMatch struct {
	name    string
	check   bool // --rcheck / --update
	set     bool
	seconds int
}

type markMatch struct {
	value, mask uint32
	neg         bool
}

type stateMatch struct {
	states []string
	neg    bool
}

// Parse reads iptables-save output or iptables-restore input. Chains that
// rules refer to but that are not declared (a partial restore) are left
// undeclared; the walker reports jumps to them.
func Parse(data []byte) (*Ruleset, error) {
	rs := &Ruleset{Tables: map[string]*Table{}}
	var cur *Table
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(nil, 1<<20)
	n := 0
	for sc.Scan() {
		n++
		l := strings.TrimSpace(sc.Text())
		if strings.HasPrefix(l, "[") { // iptables-save -c prints counters first
			if _, rest, ok := strings.Cut(l, "] "); ok {
				l = rest
			}
		}
		switch {
		case l == "" || strings.HasPrefix(l, "#"):
		case strings.HasPrefix(l, "*"):
			name := l[1:]
			if rs.Tables[name] == nil {
				rs.Tables[name] = &Table{Name: name, Chains: map[string]*Chain{}}
			}
			cur = rs.Tables[name]
		case l == "COMMIT":
			cur = nil
		case cur == nil:
			return nil, fmt.Errorf("line %d: %q outside a table", n, l)
		case strings.HasPrefix(l, ":"):
			f := strings.Fields(l[1:])
			c := cur.chain(f[0])
			if len(f) > 1 && f[1] != "-" {
				c.Policy = f[1]
			}
		case strings.HasPrefix(l, "-A ") || strings.HasPrefix(l, "--append "):
			words, err := iptables.Tokenize(l)
			if err != nil {
				return nil, fmt.Errorf("line %d: %w", n, err)
			}
			if len(words) < 2 {
				return nil, fmt.Errorf("line %d: rule without chain", n)
			}
			c := cur.chain(words[1])
			r := parseRule(words[2:])
			r.Chain, r.Num, r.Text = c.Name, len(c.Rules)+1, l
			c.Rules = append(c.Rules, r)
		case strings.HasPrefix(l, "-X "):
			delete(cur.Chains, strings.TrimSpace(l[3:]))
		default:
			return nil, fmt.Errorf("line %d: cannot read %q", n, l)
		}
	}
	return rs, sc.Err()
}

func (t *Table) chain(name string) *Chain {
	c := t.Chains[name]
	if c == nil {
		c = &Chain{Name: name}
		t.Chains[name] = c
	}
	return c
}

// modules whose options parseRule understands; -m of any other module
// makes the rule unsupported.
var knownModules = map[string]bool{
	"tcp": true, "udp": true, "sctp": true, "comment": true, "addrtype": true, "statistic": true,
	"recent": true, "mark": true, "conntrack": true, "state": true,
}

// options that accept a preceding "!".
var negatable = map[string]bool{
	"-p": true, "--protocol": true, "-s": true, "--source": true, "--src": true,
	"-d": true, "--destination": true, "--dst": true, "--dport": true, "--destination-port": true,
	"--sport": true, "--source-port": true, "--src-type": true, "--dst-type": true,
	"--mark": true, "--ctstate": true, "--state": true,
}

// options that take no value.
var flagOptions = map[string]bool{
	"--rcheck": true, "--set": true, "--update": true, "--remove": true, "--reap": true, "--rsource": true,
	"--rdest": true, "--random-fully": true, "--random": true, "--persistent": true,
}

func parseRule(w []string) *Rule {
	r := &Rule{probability: -1}
	neg := false
	unsupported := func(what string) { r.Unsupported = append(r.Unsupported, what) }
	for i := 0; i < len(w); i++ {
		opt := w[i]
		if opt == "!" {
			neg = true
			continue
		}
		val := ""
		if !flagOptions[opt] {
			if i+1 >= len(w) {
				unsupported(opt + " without value")
				break
			}
			i++
			val = w[i]
		}
		switch opt {
		case "-m", "--match":
			if !knownModules[val] {
				unsupported("-m " + val)
			}
		case "-p", "--protocol":
			r.proto, r.protoNeg = strings.ToLower(val), neg
		case "-s", "--source", "--src":
			r.src = parseAddr(val, neg, unsupported)
		case "-d", "--destination", "--dst":
			r.dst = parseAddr(val, neg, unsupported)
		case "--dport", "--destination-port":
			r.dport = parsePorts(val, neg, unsupported)
		case "--sport", "--source-port":
			r.sport = parsePorts(val, neg, unsupported)
		case "--src-type", "--dst-type":
			if val != "LOCAL" {
				unsupported(opt + " " + val)
			}
			tm := &typeMatch{typ: val, neg: neg}
			if opt == "--src-type" {
				r.srcType = tm
			} else {
				r.dstType = tm
			}
		case "--mode":
			if val != "random" {
				unsupported("--mode " + val)
			}
		case "--probability":
			p, err := strconv.ParseFloat(val, 64)
			if err != nil {
				unsupported("--probability " + val)
			}
			r.probability = p
		case "--name":
			r.recentMatch().name = val
		case "--rcheck", "--update":
			r.recentMatch().check = true
		case "--set":
			r.recentMatch().set = true
		case "--seconds":
			r.recentMatch().seconds, _ = strconv.Atoi(val)
		case "--reap", "--rsource":
		case "--mark":
			v, m, ok := parseMark(val)
			if !ok {
				unsupported("--mark " + val)
			}
			r.mark = &markMatch{value: v, mask: m, neg: neg}
		case "--ctstate", "--state":
			r.ctstate = &stateMatch{states: strings.Split(val, ","), neg: neg}
		case "--comment":
			r.Comment = val
		case "-j", "--jump", "-g", "--goto":
			r.Target, r.Goto = val, opt == "-g" || opt == "--goto"
		case "--to-destination":
			r.toDestination = val
		case "--to-ports":
			r.toPorts = val
		case "--or-mark":
			r.orMark = parseHex(val, unsupported)
		case "--xor-mark":
			r.xorMark = parseHex(val, unsupported)
		case "--set-xmark", "--set-mark":
			v, m, ok := parseMark(val)
			if !ok {
				unsupported(opt + " " + val)
			}
			r.hasSetMark, r.setMark, r.setMarkMask = true, v, m
		case "--reject-with", "--random-fully", "--random", "--persistent", "--log-prefix", "--log-level":
		case "-c", "--set-counters":
			i++ // packets and bytes
		default:
			unsupported(opt)
		}
		if neg && !negatable[opt] {
			unsupported("! " + opt)
		}
		neg = false
	}
	return r
}

func (r *Rule) recentMatch() *recentMatch {
	if r.recent == nil {
		r.recent = &recentMatch{}
	}
	return r.recent
}

func parseAddr(s string, neg bool, unsupported func(string)) *addrMatch {
	if p, err := netip.ParsePrefix(s); err == nil {
		return &addrMatch{prefix: p.Masked(), neg: neg}
	}
	if a, err := netip.ParseAddr(s); err == nil {
		return &addrMatch{prefix: netip.PrefixFrom(a, a.BitLen()), neg: neg}
	}
	unsupported("address " + s)
	return nil
}

func parsePorts(s string, neg bool, unsupported func(string)) *portMatch {
	lo, hi, isRange := strings.Cut(s, ":")
	l, err1 := strconv.ParseUint(lo, 10, 16)
	h := l
	var err2 error
	if isRange {
		h, err2 = strconv.ParseUint(hi, 10, 16)
	}
	if err1 != nil || err2 != nil {
		unsupported("port " + s)
		return nil
	}
	return &portMatch{lo: uint16(l), hi: uint16(h), neg: neg}
}

func parseMark(s string) (value, mask uint32, ok bool) {
	v, m, hasMask := strings.Cut(s, "/")
	vv, err := strconv.ParseUint(v, 0, 32)
	if err != nil {
		return 0, 0, false
	}
	mm := uint64(0xffffffff)
	if hasMask {
		if mm, err = strconv.ParseUint(m, 0, 32); err != nil {
			return 0, 0, false
		}
	}
	return uint32(vv), uint32(mm), true
}

func parseHex(s string, unsupported func(string)) uint32 {
	v, err := strconv.ParseUint(s, 0, 32)
	if err != nil {
		unsupported("mark " + s)
	}
	return uint32(v)
}
