// Package cmwire holds the wire formats of InfiniBand connection management
// as Linux's ib_cm and rdma_cm speak them over RoCEv2: the 256-byte MAD
// that carries every message to and from QP 1 (the GSI queue pair), the CM
// class's messages (REQ, MRA, REJ, REP, RTU, DREQ, DREP, SIDR_REQ,
// SIDR_REP, LAP, APR) and ClassPortInfo, the rdma_cm header that opens the
// private data of a REQ or SIDR_REQ, and the service IDs of rdma_cm's port
// spaces.
//
// Field layouts are IBTA volume 1 chapter 12's tables as Linux declares them
// (include/rdma/ibta_vol1_c12.h): a field is a byte offset into the
// message (after the 24-byte MAD header), a bit offset from the most
// significant bit of that byte, and a width. Every message is a fixed-size
// MAD, so decoding cannot fail once ParseMAD has accepted 256 bytes: the
// Decode functions read every field (private data as a view into the MAD,
// nothing allocated) and the Encode methods write them back, so that a
// decoded message re-encodes to the same bytes.
//
// What a receiver does with a MAD that is valid on the wire but not for
// it (another class, another method, an unknown attribute) is Linux's
// rule, in Check.
package cmwire
