// Package rdmacm is goroce's connection manager: what Linux's ib_cm and
// rdma_cm are to an RDMA program, over RoCEv2. It speaks the CM's MADs
// through QP 1 as a kernel peer does (package cmwire has the wire
// formats), moves the QPs it connects through INIT, RTR and RTS as the
// kernel does, and gives a Go program listeners and dialers in the manner
// of package net:
//
//	cm, _ := rdmacm.New(dev, rdmacm.Config{})
//	l, _ := cm.Listen(rdmacm.ListenConfig{Addr: netip.MustParseAddrPort("0.0.0.0:7174")})
//	req, _ := l.Accept(ctx)
//	conn, _ := req.Accept(ctx, rdmacm.AcceptConfig{Prepare: postReceives})
//
//	d := rdmacm.Dialer{CM: cm, Prepare: postReceives}
//	conn, err := d.Dial(ctx, netip.MustParseAddrPort("198.18.0.11:7174"))
//
// A connection is an RC QP in RTS with its CQs (Conn); UD services are
// resolved with SIDR (Dialer.DialUD, a UD Listener's Request.AcceptUD).
// Errors say what happened: *RejectedError with the REJ's reason,
// ErrUnreachable (ErrTimeout: no answer through every retry), ErrClosed.
//
// The protocol is Linux's, message for message: a REQ carries the
// rdma_cm header (IP addresses and source port) in its private data and
// a service ID of the port space and port; the passive side checks the
// REQ as ib_cm does (duplicates, stale connections by the peer's QP, the
// service ID, the path's GID) and as rdma_cm does (QP type, header,
// address); REQ, REP and DREQ are resent after their timeouts (from the
// REQ's CM response timeouts and the path's packet life time) up to the
// REQ's max CM retries, and an MRA stretches the wait; a disconnect ends
// in timewait. A listener's backlog bounds the requests that wait, and
// what does not fit is dropped without an answer, as Linux drops it, so
// that the peer retries.
//
// Every MAD from the network is hostile: the GSI takes exactly one MAD per
// UD SEND to QP 1 with the GSI Q_Key, queues at most 512 (Linux's receive
// buffers), and the CM refuses what Linux refuses, answering where Linux
// answers (Gets and Sets of classes nobody serves get status
// "unsupported method/attribute"; a DREQ for no connection its DREP; a REQ
// for no listener a REJ). Each drop is counted (Counters).
//
// Concurrency: see CM. Connection events come on Conn.Events and Done;
// nothing of the application's runs under the CM's lock.
package rdmacm
