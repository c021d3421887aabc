/*
 * The worker-ID lease protocol of idmint, as the code runs it, for spin to check exhaustively.
 * docs/workers.md ("The lease protocol, checked") maps every event below to the code and states
 * the bounds; test/lease-model.test.ts runs it in npm test.
 *
 * One worker ID, N = 2 nodes wanting it (-DN=3 for three: docs/workers.md gives the bounds it
 * completes at, outside npm test), one registry (token-guarded, as Redis, SQL and etcd
 * are). Time is in ticks of the registry's clock (real time). Each node reads its own clock: node
 * 1 starts 0 or OFF ticks ahead of node 0 (renaming the nodes covers the other sign), and node 0's
 * clock drifts boundedly: in any W consecutive ticks at most one of its ticks is lost (a fast
 * clock only ends a fence early; for timestamps it is an offset). Requests travel in a bag of K
 * slots: handled in any order, after any delay, or lost (also when the bag is full). A node awaits
 * one reply at a time; a reply may be late, or never come (the node gives up: a timeout). Timers
 * are nondeterministic: an acquire, a renewal, a give-up can happen at any tick, one request per
 * node per tick, SENDS requests in all; one crash (memory lost, requests in flight kept) or close.
 * A node able to issue issues at every clock reading.
 *
 * Invariants, checked after every event:
 *   EXCLUSIVE  never two nodes able to issue under the worker ID at one instant;
 *   AFTER      every ID issued has a later timestamp than every ID issued before it under the
 *              worker ID, by any holder (so a new holder starts after the previous one's last);
 *   RECORD     the registry's record is never below a timestamp issued (a renewal that lands
 *              late never lowers it below what its holder may issue).
 *
 * Weakened variants, each of which spin must refute with a trail (-D at spin -a):
 *   NO_MARGIN          the fence is TTL after the renewal was sent, with no margin for drift;
 *   READ_BEFORE_CLAIM  acquire reads the record, then claims, and starts from what it read;
 *   RENEW_OVERWRITES   a renewal stores its report instead of the larger of report and record.
 * NONVACUITY asserts that no holder ever takes over from one that issued: its trail shows the
 * model reaches takeovers at all, so the invariants are not checked on an empty set.
 */

#ifndef N
#define N 2
#endif
#ifndef TMAX
#define TMAX 9
#endif
#define TTL 3
#ifdef NO_MARGIN
#define MARGIN 0
#else
#define MARGIN 1
#endif
#define W 3
#define OFF 2
#ifndef K
#define K 2
#endif
#define RESTARTS 1
#ifndef SENDS
#define SENDS 6
#endif
#define NONE 255

#define MAX(a, b) ((a) > (b) -> (a) : (b))

mtype = { ACQ, RENEW, REL, ACQ_OK, ACQ_NO, RENEW_OK, LOST };

/* A request (node to registry) or a reply (registry to node). */
typedef Msg {
  bool used;
  mtype kind;
  byte node;
  byte tok;
  byte last;
  byte at;
  bool stale; /* its sender gave up on it or crashed: it may still land, its reply is dropped */
  bool read;  /* READ_BEFORE_CLAIM: the record was read (snapLast, snapAt), the claim not made */
  byte snapLast;
  byte snapAt
}

Msg req[K];
Msg rep[N]; /* one per node: a node awaits one reply at a time */

/* The registry: the lease and the record (WorkerRegistry, src/ports/worker-registry.ts). */
byte now = 0;
byte holder = NONE;
byte regTok = 0;
byte expires = 0;
byte recLast = 0;
byte recAt = 0;

/* A node (LeaseHolder, src/service/lease-holder.ts, and lease-holding.ts). */
#define IDLE 0      /* no lease: recovering, or not started */
#define ACQUIRING 1 /* acquire sent */
#define WAITING 2   /* lease taken; waitForClock until the clock passes the record */
#define FIRST 3     /* generator created fenced; its first renewal in flight */
#define HOLD 4      /* holding; issuing while the clock is below the fence */

byte st[N];
byte clk[N];
byte skewAge[N]; /* normal ticks since the last slow one (at most W - 1) */
bool slow[N];     /* the next tick leaves the clock where it is */
byte tok[N];
byte leaseLast[N];
byte leaseAt[N];
byte genLast[N];  /* the generator's last timestamp */
byte vu[N];       /* the generator's fence (validUntil): it issues while clk < vu */
byte recorded[N]; /* holding.recorded */
byte hw[N];       /* the process's high water for the worker ID (lost on a crash) */
bool awaiting[N]; /* a reply is awaited: one transition at a time */
byte pendT0[N];
byte pendHor[N];
bool acted[N];    /* sent a request this tick */
byte restarts = 0; /* crashes and closes, all nodes together */

/* Ghosts for the invariants. */
byte sends = 0; /* requests sent, by all nodes: at most SENDS */
byte maxIssued = 0;
byte lastIssuer = NONE;
byte lastIssuerTok = 0;
bool takeover = false;

#define CAN_ISSUE(i) (st[i] == HOLD && clk[i] < vu[i])

/* A node able to issue does, at every clock reading: the most IDs, the most chances to clash. */
inline issue(i) {
  if
  :: CAN_ISSUE(i) && clk[i] > genLast[i] ->
     assert(clk[i] > maxIssued); /* AFTER */
     takeover = takeover || (lastIssuer != NONE && (lastIssuer != i || lastIssuerTok != tok[i]));
     lastIssuer = i; lastIssuerTok = tok[i]; genLast[i] = clk[i]; maxIssued = clk[i]
  :: else
  fi
}

inline check() {
  issue(0);
  issue(1);
#if N > 2
  issue(2);
#endif
  assert(!(CAN_ISSUE(0) && CAN_ISSUE(1))); /* EXCLUSIVE */
#if N > 2
  assert(!(CAN_ISSUE(0) && CAN_ISSUE(2)) && !(CAN_ISSUE(1) && CAN_ISSUE(2)));
#endif
  assert(recLast >= maxIssued); /* RECORD */
#ifdef NONVACUITY
  assert(!takeover);
#endif
  i = 0; j = 0; v = 0 /* scratch: not part of the state */
}

/* A freed slot and an idle node are zeroed, so that equal situations are one state. */
inline freeReq(s) {
  req[s].used = 0; req[s].kind = 0; req[s].node = 0; req[s].tok = 0; req[s].last = 0;
  req[s].at = 0; req[s].stale = 0; req[s].read = 0; req[s].snapLast = 0; req[s].snapAt = 0
}

inline freeRep(s) {
  rep[s].used = 0; rep[s].kind = 0; rep[s].node = 0; rep[s].tok = 0; rep[s].last = 0;
  rep[s].at = 0
}

inline toIdle(i) {
  st[i] = IDLE; tok[i] = 0; leaseLast[i] = 0; leaseAt[i] = 0; genLast[i] = 0; vu[i] = 0;
  recorded[i] = 0; pendT0[i] = 0; pendHor[i] = 0
}

inline send(k, i, t, l, a, stl) {
  sends++;
  j = 0;
  do
  :: j < K && req[j].used -> j++
  :: j < K && !req[j].used ->
     req[j].used = 1; req[j].kind = k; req[j].node = i; req[j].tok = t;
     req[j].last = l; req[j].at = a; req[j].stale = stl; req[j].read = 0;
     break
  :: j == K -> break /* the network is full: this one is lost */
  od
}

inline reply(k, i, t, l, a) {
  rep[i].used = 1; rep[i].kind = k; rep[i].node = i; rep[i].tok = t; rep[i].last = l;
  rep[i].at = a
}

/* A give-up (withTimeout) or a crash: the request may still land; its reply goes nowhere. */
inline abandon(i) {
  j = 0;
  do
  :: j < K -> if :: req[j].used && req[j].node == i -> req[j].stale = 1 :: else fi;
              j++
  :: else -> break
  od;
  freeRep(i);
  awaiting[i] = 0
}

/* renewHolding: the fence counts from the clock reading before the request is sent. */
inline sendRenewal(i) {
  pendT0[i] = clk[i];
  pendHor[i] = MAX(MAX(clk[i] + TTL - MARGIN, genLast[i]), recorded[i]);
  awaiting[i] = 1;
  acted[i] = 1;
  send(RENEW, i, tok[i], pendHor[i], pendT0[i], 0)
}

/* establishHolding's catch: release with the record as found (nothing was issued). */
inline giveBack(i) {
  send(REL, i, tok[i], leaseLast[i], leaseAt[i], 1);
  toIdle(i)
}

/* retire + finalReport: fence, then release with the exact last timestamp. */
inline retireAndRelease(i) {
  vu[i] = 0;
  hw[i] = MAX(hw[i], genLast[i]);
  v = MAX(genLast[i], leaseLast[i]); /* spin takes no conditional expression as an argument */
  send(REL, i, tok[i], v, clk[i], 1);
  toIdle(i)
}

/* A tick of node i's clock: it stands if a slow skew is pending, else moves one. */
inline tickClock(i) {
  if
  :: slow[i] -> slow[i] = 0; skewAge[i] = 0
  :: else -> clk[i]++; if :: skewAge[i] < W - 1 -> skewAge[i]++ :: else fi
  fi;
  acted[i] = 0
}

/* The registry handles request s. */
inline handle(s) {
  i = req[s].node;
  if
  :: req[s].kind == ACQ ->
     if
#ifdef READ_BEFORE_CLAIM
     /* The read, a step of its own: the claim comes later, starting from what was read. */
     :: !req[s].read -> req[s].read = 1; req[s].snapLast = recLast; req[s].snapAt = recAt
     :: req[s].read && holder != NONE && now < expires ->
        if :: !req[s].stale -> reply(ACQ_NO, i, 0, 0, 0) :: else fi; freeReq(s)
     :: req[s].read && (holder == NONE || now >= expires) ->
        regTok++; holder = i; expires = now + TTL;
        if :: !req[s].stale -> reply(ACQ_OK, i, regTok, req[s].snapLast, req[s].snapAt)
           :: else fi;
        freeReq(s)
#else
     :: holder != NONE && now < expires ->
        if :: !req[s].stale -> reply(ACQ_NO, i, 0, 0, 0) :: else fi;
        freeReq(s)
     :: else ->
        regTok++; holder = i; expires = now + TTL;
        if :: !req[s].stale -> reply(ACQ_OK, i, regTok, recLast, recAt) :: else fi;
        freeReq(s)
#endif
     fi
  :: req[s].kind == RENEW ->
     if
     :: holder == i && regTok == req[s].tok ->
        /* Expired but not claimed since: SQL renews it (here), Redis reports it lost (the
           EXPIRED event below). */
#ifdef RENEW_OVERWRITES
        recLast = req[s].last; recAt = req[s].at;
#else
        recLast = MAX(recLast, req[s].last); recAt = MAX(recAt, req[s].at);
#endif
        expires = now + TTL;
        if :: !req[s].stale -> reply(RENEW_OK, i, 0, 0, 0) :: else fi
     :: else -> if :: !req[s].stale -> reply(LOST, i, 0, 0, 0) :: else fi
     fi;
     freeReq(s)
  :: req[s].kind == REL ->
     if
     :: holder == i && regTok == req[s].tok -> recLast = req[s].last; recAt = req[s].at;
        holder = NONE
     :: else
     fi;
     freeReq(s)
  fi
}

/* Node i receives reply s. */
inline deliver(s) {
  i = rep[s].node;
  awaiting[i] = 0;
  if
  :: st[i] == ACQUIRING && rep[s].kind == ACQ_NO -> toIdle(i)
  :: st[i] == ACQUIRING && rep[s].kind == ACQ_OK ->
     tok[i] = rep[s].tok; leaseLast[i] = rep[s].last; leaseAt[i] = rep[s].at;
     if
     :: clk[i] < leaseAt[i] -> giveBack(i) /* clock check 1: behind the record, refuse */
     :: else -> st[i] = WAITING            /* clock check 2: wait to pass leaseLast */
     fi
  :: st[i] == FIRST && rep[s].kind == RENEW_OK ->
     recorded[i] = pendHor[i]; vu[i] = pendT0[i] + TTL - MARGIN; st[i] = HOLD
  :: st[i] == FIRST && rep[s].kind == LOST -> giveBack(i)
  :: st[i] == HOLD && rep[s].kind == RENEW_OK ->
     recorded[i] = pendHor[i]; vu[i] = pendT0[i] + TTL - MARGIN
  :: st[i] == HOLD && rep[s].kind == LOST -> retireAndRelease(i) /* markLost, then lose */
  :: else
  fi;
  freeRep(s)
}

/* The events of node I (a macro: one option per event). */
#define NODE(I) \
  :: d_step { st[I] == IDLE && !acted[I] && sends < SENDS -> \
       st[I] = ACQUIRING; awaiting[I] = 1; acted[I] = 1; send(ACQ, I, 0, 0, 0, 0); check() } \
  :: d_step { st[I] == ACQUIRING && awaiting[I] -> abandon(I); toIdle(I); check() } \
  :: d_step { st[I] == WAITING && clk[I] > leaseLast[I] && !acted[I] && sends < SENDS -> \
       genLast[I] = MAX(leaseLast[I], hw[I]); vu[I] = 0; recorded[I] = leaseLast[I]; \
       st[I] = FIRST; sendRenewal(I); check() } \
  :: d_step { st[I] == FIRST && awaiting[I] -> abandon(I); giveBack(I); check() } \
  :: d_step { st[I] == HOLD && !awaiting[I] && !acted[I] && sends < SENDS -> sendRenewal(I); check() } \
  :: d_step { st[I] == HOLD && awaiting[I] -> abandon(I); check() } \
  :: d_step { st[I] == HOLD && restarts < RESTARTS -> \
       restarts++; abandon(I); retireAndRelease(I); hw[I] = 0; check() } \
  :: d_step { st[I] != IDLE && restarts < RESTARTS -> \
       restarts++; abandon(I); toIdle(I); hw[I] = 0; \
       check() } \
  :: d_step { I == 0 && skewAge[I] >= W - 1 && !slow[I] -> slow[I] = 1; check() }

#define REQ(S) \
  :: d_step { req[S].used -> handle(S); check() } \
  :: d_step { req[S].used -> freeReq(S); check() } \
  :: d_step { req[S].used && req[S].kind == RENEW && holder == req[S].node && \
              regTok == req[S].tok && now >= expires -> \
       i = req[S].node; if :: !req[S].stale -> reply(LOST, i, 0, 0, 0) :: else fi; \
       freeReq(S); check() }

#define REP(S) \
  :: d_step { rep[S].used -> deliver(S); check() }

active proctype world() {
  byte i, j, v;
  atomic {
    i = 0;
    do
    :: i < N ->
       if :: i == 0 -> clk[i] = 1
          :: i > 0 -> if :: clk[i] = 1 :: clk[i] = 1 + OFF fi
       fi;
       skewAge[i] = W - 1;
       i++
    :: else -> break
    od
  }
  do
  :: d_step { now < TMAX ->
       now++; i = 0;
       do :: i < N -> tickClock(i); i++ :: else -> break od;
       check() }
  NODE(0)
  NODE(1)
#if N > 2
  NODE(2)
#endif
  REQ(0)
  REQ(1)
#if K > 2
  REQ(2)
#endif
  REP(0)
  REP(1)
#if N > 2
  REP(2)
#endif
  :: now == TMAX -> break
  od
}
