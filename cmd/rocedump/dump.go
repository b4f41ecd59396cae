package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"time"

	"github.com/google/gopacket"

	"github.com/goroce/goroce/pcap"
)

// The SMC hooks, through variables so that tests can stand in for the SMC
// decoders.
var (
	smcJSONFunc    = smcJSON
	smcSummaryFunc = smcSummary
)

// dumper prints the frames of one capture.
type dumper struct {
	cfg     config
	out     *bufio.Writer
	errOut  io.Writer // malformed-frame reports in -json mode
	enc     *json.Encoder
	stats   *stats
	first   time.Time
	started bool
	printed int
}

func newDumper(cfg config, out *bufio.Writer, errOut io.Writer) *dumper {
	d := &dumper{cfg: cfg, out: out, errOut: errOut, enc: json.NewEncoder(out)}
	d.enc.SetEscapeHTML(false)
	if cfg.stats {
		d.stats = newStats()
	}
	return d
}

// dump reads and prints every frame, then the statistics. A read error
// ends the dump (after the statistics of what was read) and is returned.
func (d *dumper) dump(r *pcap.Reader) error {
	var readErr error
	for frame := 1; d.cfg.count == 0 || d.printed < d.cfg.count; frame++ {
		rec, err := r.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			readErr = fmt.Errorf("frame %d: %w", frame, err)
			break
		}
		if !d.started {
			d.first, d.started = rec.Time, true
		}
		if err := d.frame(frame, &rec); err != nil {
			return err
		}
	}
	if d.stats != nil {
		if err := d.stats.write(d.out); err != nil {
			return err
		}
	}
	return readErr
}

// frame prints one frame if it is RoCEv2 (or carries SMC over TCP) and
// passes the filter.
func (d *dumper) frame(n int, rec *pcap.Record) error {
	p := gopacket.NewPacket(rec.Data, rec.LinkType, gopacket.DecodeOptions{NoCopy: true})
	r, isRoCE, malformed := classify(p, rec)
	if !isRoCE {
		return d.other(n, rec, p)
	}
	if malformed != nil {
		if !d.cfg.filter.matchHost(r.src, r.dst) {
			return nil
		}
		w := io.Writer(d.out)
		if d.cfg.json {
			w = d.errOut
		}
		_, err := fmt.Fprintf(w, "frame %d: malformed RoCE: %v\n", n, malformed)
		return err
	}
	if !d.cfg.filter.matchRoCE(r.src, r.dst, r.bth.Opcode, r.bth.DestQP) {
		return nil
	}
	d.printed++
	if d.stats != nil {
		d.stats.add(&r)
	}
	switch {
	case d.cfg.quiet:
		return nil
	case d.cfg.json:
		return d.enc.Encode(newJSONPacket(n, p, &r))
	}
	_, err := fmt.Fprintln(d.out, textLine(formatTime(rec.Time, d.first, d.cfg.absTime), &r, smcSummaryFunc(p), pcap.MADSummary(p)))
	return err
}

// other prints a non-RoCE frame that carries SMC messages over TCP (CLC).
func (d *dumper) other(n int, rec *pcap.Record, p gopacket.Packet) error {
	src, dst, ok := tcpEndpoints(p)
	if !ok || !d.cfg.filter.matchOther(src.Addr(), dst.Addr()) || d.cfg.quiet {
		return nil
	}
	if d.cfg.json {
		v := smcJSONFunc(p)
		if v == nil {
			return nil
		}
		d.printed++
		return d.enc.Encode(jsonSMCOnly{Frame: n, SMC: v})
	}
	s := smcSummaryFunc(p)
	if s == "" {
		return nil
	}
	d.printed++
	_, err := fmt.Fprintf(d.out, "%s %s > %s: TCP smc %s\n", formatTime(rec.Time, d.first, d.cfg.absTime),
		hostPort(src.Addr(), src.Port()), hostPort(dst.Addr(), dst.Port()), s)
	return err
}
