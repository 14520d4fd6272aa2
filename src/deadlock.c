/*-------------------------------------------------------------------------
 *
 * deadlock.c
 *	  Deadlock detection across backends and clusters: the fleet-wide
 *	  wait-for graph, read from ZooKeeper, and the wait entries that let
 *	  it be read.  Part of the recipe layer: it reads queues with queue.c
 *	  and talks to the session below; the engine drives it from its wait
 *	  (deadlock.h), and it knows nothing of the engine.
 *
 * Every contender's node, and so what blocks a waiter, is in ZooKeeper
 * already; what is not is where the owner of a blocking node waits.  A
 * wait that has lasted deadlock_timeout publishes that in an ephemeral
 * wait entry, <root>/.zklock-waits/<uuid of the waiting node>, holding the
 * owner record of the node plus its directory and name (no text name
 * escapes to a name starting with a dot, so this can't be a lock).  Waits
 * shorter than deadlock_timeout publish nothing and search nothing.
 *
 * The search (after deadlock_timeout of a wait, then at growing intervals)
 * follows edges waiter -> node ahead of it that blocks it
 * (dl_blocks) -> the session that owns that node (the session part
 * of its uuid) -> where that session waits: in the same directory when
 * its node there is blocked itself (a backend waits for one lock at a
 * time), else as its wait entries say, each checked to name a node that
 * is still there and still blocked, so a stale entry never makes a false
 * edge.  Only holders cost a read of their entries; a long queue in one
 * directory costs one listing.  It reads with plain
 * get and list requests: no watch, no wake for anyone.  Nodes of other
 * clients own no entry: they count as not waiting.  A path back to a node
 * of this backend's session is a cycle.
 *
 * A semaphore's acquirer waits first in the queue of the semaphore's mutex
 * (a lock directory like any other), then, holding the mutex, for a lease:
 * its entry then names the leases directory and its max_leases, and while
 * the directory has more children than that, every other lease (of
 * another session) is in its way.  Unlike a lock's, such a wait ends when
 * enough of them go, whichever: it closes a cycle only when too few of
 * those leases belong to sessions that do not wait on this backend.
 *
 * Exactly one member of a cycle ends its wait: the first that finds the
 * cycle and creates the ephemeral claim <root>/.zklock-deadlocks/<hash of
 * the members' waiting nodes>, in one transaction with a check that every
 * member's node is still there; a member that finds the claim taken (by
 * another session) goes on waiting.  A claim goes when its wait ends,
 * after the victim's node: a member that sees the cycle late finds the
 * claim, or finds a member's node gone, and can never claim it a second
 * time.  A claim whose create was not answered may be this session's: a
 * later search that finds it owned by this session takes it as its own,
 * and the end of the wait deletes it only if the ensemble says it is this
 * session's (another member may have made it: deleting that one would let
 * a late member claim the cycle again).
 *
 * Wait entries are written by other clients too, and are read as
 * untrusted input: an entry that names a directory outside zklock.root's
 * locks and semaphores, or a node name no lock could have, is skipped;
 * the search's lookups are bounded, and what was not read counts as not
 * waiting.
 *
 * Every request of a search is freed on every way out, a cancel included.
 *
 *-------------------------------------------------------------------------
 */
#define ZKL_RECIPE_LAYER
#include "postgres.h"

#include "lib/stringinfo.h"
#include "miscadmin.h"
#include "storage/proc.h"
#include "utils/guc.h"
#include "utils/hsearch.h"
#include "utils/memutils.h"
#include "utils/timestamp.h"

#include "deadlock.h"
#include "guc.h"
#include "owner.h"
#include "queue.h"
#include "views.h"

#define ZKL_WAITS_DIR ".zklock-waits"
#define ZKL_CLAIMS_DIR ".zklock-deadlocks"

/* Bounds of one search: members of a cycle, and lookups in all. */
#define DL_MAX_DEPTH 64
#define DL_MAX_LOOKUPS 512

/* One waiter of the graph. */
typedef struct ZklDlWaiter
{
	char		session[ZKL_UUID_SESSION_LEN + 1];
	char	   *dir;
	char	   *node;			/* child name of its waiting node */
	int			max_leases;		/* > 0: waits for a lease of a semaphore */
	char	   *cluster;
	int			pid;
	char	   *blocked_by;		/* on a cycle: the node in its way */
} ZklDlWaiter;

/* One directory listing, read, parsed and ordered once per search. */
typedef struct ZklDlListing
{
	char	   *dir;
	ZklQueue	q;				/* no node marked ours */
} ZklDlListing;

typedef struct ZklDlSearch
{
	char		own[ZKL_UUID_SESSION_LEN + 1];
	ZklOp	  **ops;			/* every request sent; freed on every way out */
	int			nops;
	int			maxops;
	List	   *entries;		/* names in the waits directory */
	List	   *listings;
	HTAB	   *visited;		/* sessions already followed */
	ZklDlWaiter   *path[DL_MAX_DEPTH];
	int			depth;
	ZklDeadlockWait *wait;		/* the searching wait (NULL: the view) */
	MemoryContext wait_cxt;		/* where its claims are kept */
} ZklDlSearch;

static char *
dl_waits_dir(void)
{
	return psprintf("%s/%s", zkl_root, ZKL_WAITS_DIR);
}

/* Keep a request sent, so that every way out frees it. */
static ZklOp *
dl_keep(ZklDlSearch *s, ZklOp *op)
{
	if (s->nops == s->maxops)
	{
		s->maxops = Max(16, s->maxops * 2);
		s->ops = s->ops ? repalloc(s->ops, sizeof(ZklOp *) * s->maxops)
			: palloc(sizeof(ZklOp *) * s->maxops);
	}
	s->ops[s->nops++] = op;
	return op;
}

/* Keep a request and wait for its answer. */
static ZklRc
dl_answer(ZklDlSearch *s, ZklOp *op)
{
	return zkl_session_answer(dl_keep(s, op));
}

static void
dl_free(ZklDlSearch *s)
{
	for (int i = 0; i < s->nops; i++)
		zkl_session_op_free(s->ops[i]);
	s->nops = 0;
}

/* The children of dir, listed once per search; NULL when it is gone. */
static ZklDlListing *
dl_listing(ZklDlSearch *s, const char *dir)
{
	ListCell   *lc;
	ZklDlListing  *l;
	ZklOp	   *op;
	char	  **names;
	int			n;

	foreach(lc, s->listings)
	{
		l = lfirst(lc);
		if (strcmp(l->dir, dir) == 0)
			return l;
	}
	if (s->nops >= DL_MAX_LOOKUPS)
		return NULL;
	op = zkl_session_children(dir);
	l = palloc0(sizeof(ZklDlListing));
	l->dir = pstrdup(dir);
	if (dl_answer(s, op) == ZKL_RC_OK)
	{
		n = zkl_session_op_children(op, &names);
		zkl_queue_parse(&l->q, names, n, NULL);
	}
	s->listings = lappend(s->listings, l);
	return l;
}

/*
 * Where a child sits in a listing's queue order, -1 if it is not there.
 * The listing is sorted by sequence number, so a binary search finds it
 * (equal numbers sit together); a long queue is searched once per member
 * visited, so a scan here would make every search quadratic.
 */
static int
dl_position(const ZklDlListing *l, const char *name)
{
	ZklChild	c;
	int			lo = 0;
	int			hi = l->q.nkids - 1;

	if (!zkl_names_parse_child(name, NULL, &c))
		return -1;
	while (lo <= hi)
	{
		int			mid = lo + (hi - lo) / 2;
		int			cmp = zkl_names_seq_cmp(l->q.kids[mid].seq, c.seq);

		if (cmp < 0)
			lo = mid + 1;
		else if (cmp > 0)
			hi = mid - 1;
		else
		{
			while (mid > 0 && l->q.kids[mid - 1].seq == c.seq)
				mid--;
			for (; mid < l->q.nkids && l->q.kids[mid].seq == c.seq; mid++)
				if (strcmp(l->q.kids[mid].name, name) == 0)
					return mid;
			break;
		}
	}
	/* Not where the order says (a queue across the counter's wrap): scan. */
	for (int i = 0; i < l->q.nkids; i++)
		if (strcmp(l->q.kids[i].name, name) == 0)
			return i;
	return -1;
}

/* The name prefix of w's session's nodes; its length. */
static size_t
dl_prefix(const ZklDlWaiter *w, char *buf, size_t size)
{
	return snprintf(buf, size, "%s%s", ZKL_PROTECT_PREFIX, w->session);
}

/* Whether kids[i] blocks kids[self]: ahead, not the waiter's session's,
 * and exclusive on one side. */
static inline bool
dl_blocks(const ZklDlListing *l, int self, int i, const char *prefix, size_t plen)
{
	return i < self && strncmp(l->q.kids[i].name, prefix, plen) != 0 &&
		(!l->q.kids[self].shared || !l->q.kids[i].shared);
}

/*
 * Whether kids[i] is in w's way: for a lock, dl_blocks; for a lease, any
 * other session's lease while the semaphore is full (all children count,
 * as in Curator).  i runs below dl_span.
 */
static inline bool
dl_in_way(const ZklDlListing *l, const ZklDlWaiter *w, int self, int i,
		  const char *prefix, size_t plen)
{
	if (w->max_leases > 0)
		return i != self && l->q.n > w->max_leases &&
			strncmp(l->q.kids[i].name, prefix, plen) != 0;
	return dl_blocks(l, self, i, prefix, plen);
}

/* How far down the listing to look for nodes in w's way. */
static inline int
dl_span(const ZklDlListing *l, const ZklDlWaiter *w, int self)
{
	if (self < 0)
		return 0;
	return w->max_leases > 0 ? l->q.nkids : self;
}

/* w's place in its directory's listing (-1: gone, or no listing). */
static int
dl_self(ZklDlSearch *s, ZklDlWaiter *w, ZklDlListing **lp)
{
	ZklDlListing  *l = dl_listing(s, w->dir);

	*lp = l;
	if (l == NULL || l->q.nkids == 0)
		return -1;
	return dl_position(l, w->node);
}

/*
 * A waiter for node b of dir, when b is blocked there (its owner's one
 * wait is then in dir, so no entry needs reading); NULL when b holds.
 * Most blocked nodes are blocked by the head: the scan stops at the first.
 */
static ZklDlWaiter *
dl_waiter_in_dir(ZklDlSearch *s, const char *dir, const char *b,
				 const char *session)
{
	ZklDlWaiter   *w = palloc0(sizeof(ZklDlWaiter));
	ZklDlListing  *l;
	int			self;
	char		prefix[sizeof(ZKL_PROTECT_PREFIX) + ZKL_UUID_SESSION_LEN];
	size_t		plen;

	strlcpy(w->session, session, sizeof(w->session));
	w->dir = pstrdup(dir);
	w->node = pstrdup(b);
	self = dl_self(s, w, &l);
	plen = dl_prefix(w, prefix, sizeof(prefix));
	for (int i = 0; i < dl_span(l, w, self); i++)
		if (dl_in_way(l, w, self, i, prefix, plen))
			return w;
	return NULL;
}

/* Who owns a member found through its node: the node's owner record. */
static void
dl_fill_owner(ZklDlSearch *s, ZklDlWaiter *w)
{
	ZklOp	   *op;
	const char *data;
	int64		czxid;
	char	   *buf;
	ZklOwner	o;

	if (w->cluster != NULL)
		return;
	w->cluster = "";
	op = zkl_session_get(psprintf("%s/%s", w->dir, w->node));
	if (dl_answer(s, op) != ZKL_RC_OK)
		return;
	data = zkl_session_op_data(op, &czxid);
	buf = palloc(ZKL_OWNER_BUF(strlen(data)));
	if (!zkl_owner_parse(data, strlen(data), buf, &o))
		return;
	w->cluster = pstrdup(o.cluster_name ? o.cluster_name : "");
	w->pid = o.has_pid ? o.pid : 0;
}

/*
 * Wait entries are written by any client that may write under
 * zklock.root, so what they name is checked before it is read: a child
 * name is printable ASCII without '/' (and not "." or ".."), as every
 * name of a lock node is.
 */
static bool
dl_valid_name(const char *name)
{
	size_t		len = name ? strlen(name) : 0;

	if (len == 0 || len > 255 || strcmp(name, ".") == 0 ||
		strcmp(name, "..") == 0)
		return false;
	for (size_t i = 0; i < len; i++)
		if (name[i] < 0x21 || name[i] > 0x7e || name[i] == '/')
			return false;
	return true;
}

/*
 * A directory an entry names: a lock's or a semaphore's under zklock.root
 * (<root>/<name>, or <root>/<name>/leases), each part a valid name; the
 * search lists nothing else.
 */
static bool
dl_valid_dir(const char *dir)
{
	size_t		rootlen = strlen(zkl_root);
	char	   *rest;
	char	   *slash;

	if (dir == NULL || strncmp(dir, zkl_root, rootlen) != 0 ||
		dir[rootlen] != '/' || strlen(dir) > 1024)
		return false;
	rest = pstrdup(dir + rootlen + 1);
	slash = strchr(rest, '/');
	if (slash != NULL)
	{
		*slash = '\0';
		if (strcmp(slash + 1, "leases") != 0 && strcmp(slash + 1, "locks") != 0)
			return false;
	}
	return dl_valid_name(rest) && rest[0] != '.';
}

/* A wait entry, read and parsed; NULL if gone or not one. */
static ZklDlWaiter *
dl_read_entry(ZklDlSearch *s, const char *entry)
{
	ZklOp	   *op;
	const char *data;
	int64		czxid;
	char	   *buf;
	ZklOwner	o;
	ZklDlWaiter   *w;

	if (s->nops >= DL_MAX_LOOKUPS)
		return NULL;
	op = zkl_session_get(psprintf("%s/%s", dl_waits_dir(), entry));
	if (dl_answer(s, op) != ZKL_RC_OK)
		return NULL;
	data = zkl_session_op_data(op, &czxid);
	buf = palloc(ZKL_OWNER_BUF(strlen(data)));
	if (!zkl_owner_parse(data, strlen(data), buf, &o) ||
		!dl_valid_dir(o.waits_dir) || !dl_valid_name(o.waits_node))
		return NULL;
	w = palloc0(sizeof(ZklDlWaiter));
	strlcpy(w->session, entry, sizeof(w->session));
	w->dir = pstrdup(o.waits_dir);
	w->node = pstrdup(o.waits_node);
	w->max_leases = o.has_waits_max_leases ? Max(o.waits_max_leases, 0) : 0;
	w->cluster = pstrdup(o.cluster_name ? o.cluster_name : "");
	w->pid = o.has_pid ? o.pid : 0;
	return w;
}

/*
 * Whether a session was followed already in this search; marks it.  A
 * hash, since a long queue puts every contender's session on the way.
 */
static bool
dl_visited(ZklDlSearch *s, const char *session)
{
	bool		found;

	if (s->visited == NULL)
	{
		HASHCTL		ctl;

		ctl.keysize = ZKL_UUID_SESSION_LEN + 1;
		ctl.entrysize = ZKL_UUID_SESSION_LEN + 1;
		ctl.hcxt = CurrentMemoryContext;
		s->visited = hash_create("zklock deadlock search", 64, &ctl,
								 HASH_ELEM | HASH_STRINGS | HASH_CONTEXT);
	}
	(void) hash_search(s->visited, session, HASH_ENTER, &found);
	return found;
}

static bool dl_visit(ZklDlSearch *s, ZklDlWaiter *w);

static bool
dl_listed(List *sessions, const char *session)
{
	ListCell   *lc;

	foreach(lc, sessions)
		if (strcmp(lfirst(lc), session) == 0)
			return true;
	return false;
}

/*
 * Whether the owner of node b, the session given, waits (transitively) on
 * this backend's session; b is in w's way, w on top of the path.  True
 * leaves the cycle on the path.
 */
static bool
dl_follow(ZklDlSearch *s, ZklDlWaiter *w, char *b, const char *session)
{
	ListCell   *ec;
	ZklDlWaiter   *next;

	w->blocked_by = b;
	if (strcmp(session, s->own) == 0)
		return true;
	if (s->depth >= DL_MAX_DEPTH || dl_visited(s, session))
		return false;
	/* Queued ahead of w in the same directory: that is its wait. */
	next = w->max_leases > 0 ? NULL :
		dl_waiter_in_dir(s, w->dir, b, session);
	if (next != NULL)
		return dl_visit(s, next);
	foreach(ec, s->entries)
	{
		char	   *entry = lfirst(ec);

		if (strncmp(entry, session, ZKL_UUID_SESSION_LEN) != 0)
			continue;
		next = dl_read_entry(s, entry);
		if (next != NULL && dl_visit(s, next))
			return true;
	}
	return false;
}

/*
 * A lease waiter w (on top of the path) goes on once enough leases go,
 * whichever they are: it is stuck on this backend only when fewer of the
 * leases in its way than it needs belong to sessions that do not wait on
 * this backend.  Children that are not leases of a known session (other
 * clients' odd names) count as free; so does a session met earlier in the
 * search (its answer is not known here), which can only miss a cycle, not
 * make one up.  True leaves the first cycle found on the path.
 */
static bool
dl_visit_lease(ZklDlSearch *s, ZklDlWaiter *w, ZklDlListing *l, int self,
			   const char *prefix, size_t plen)
{
	int			base = s->depth;
	int			need;
	int			spare;
	int			cycle_depth = 0;
	ZklDlWaiter   *cycle[DL_MAX_DEPTH];
	char	   *cycle_by = NULL;
	List	   *back = NIL;		/* sessions found waiting on us, here */

	/* Not read (the lookup limit) or not there: it counts as not waiting. */
	if (l == NULL || self < 0)
		return false;
	need = l->q.n - w->max_leases;
	spare = l->q.n - l->q.nkids;
	for (int i = 0; i < dl_span(l, w, self) && spare < need; i++)
	{
		char	   *b;
		char		session[ZKL_UUID_SESSION_LEN + 1];

		if (!dl_in_way(l, w, self, i, prefix, plen))
			continue;
		b = unconstify(char *, l->q.kids[i].name);
		if (!zkl_names_session_of(b, session))
		{
			spare++;
			continue;
		}
		if (dl_listed(back, session))
			continue;
		if (!dl_follow(s, w, b, session))
		{
			spare++;
			continue;
		}
		back = lappend(back, pstrdup(session));
		if (cycle_by == NULL)
		{
			cycle_by = b;
			cycle_depth = s->depth;
			memcpy(cycle, s->path, sizeof(ZklDlWaiter *) * s->depth);
		}
		s->depth = base;
	}
	if (spare >= need || cycle_by == NULL)
		return false;
	memcpy(s->path, cycle, sizeof(ZklDlWaiter *) * cycle_depth);
	s->depth = cycle_depth;
	w->blocked_by = cycle_by;
	return true;
}

/*
 * Depth-first from w: true when a path leads back to a node of this
 * backend's session, with s->path[0 .. depth) the cycle and each member's
 * blocked_by set.  A lock waiter needs every node in its way gone, so any
 * one that leads back closes a cycle; a lease waiter, see dl_visit_lease.
 */
static bool
dl_visit(ZklDlSearch *s, ZklDlWaiter *w)
{
	ZklDlListing  *l;
	int			self = dl_self(s, w, &l);
	char		prefix[sizeof(ZKL_PROTECT_PREFIX) + ZKL_UUID_SESSION_LEN];
	size_t		plen = dl_prefix(w, prefix, sizeof(prefix));

	s->path[s->depth++] = w;
	if (w->max_leases > 0)
	{
		if (dl_visit_lease(s, w, l, self, prefix, plen))
			return true;
	}
	else
		for (int i = 0; i < dl_span(l, w, self); i++)
		{
			char	   *b;
			char		session[ZKL_UUID_SESSION_LEN + 1];

			if (!dl_in_way(l, w, self, i, prefix, plen))
				continue;
			b = unconstify(char *, l->q.kids[i].name);
			if (zkl_names_session_of(b, session) && dl_follow(s, w, b, session))
				return true;
		}
	s->depth--;
	return false;
}

/* A name for the cycle that every member computes alike. */
static char *
dl_cycle_key(ZklDlSearch *s)
{
	const char *names[DL_MAX_DEPTH];
	uint64		h = UINT64CONST(0xcbf29ce484222325);

	for (int i = 0; i < s->depth; i++)
		names[i] = psprintf("%s/%s", s->path[i]->dir, s->path[i]->node);
	/* Insertion sort: a cycle has few members. */
	for (int i = 1; i < s->depth; i++)
		for (int j = i; j > 0 && strcmp(names[j - 1], names[j]) > 0; j--)
		{
			const char *t = names[j];

			names[j] = names[j - 1];
			names[j - 1] = t;
		}
	for (int i = 0; i < s->depth; i++)
		for (const char *p = names[i]; ; p++)
		{
			h = (h ^ (unsigned char) *p) * UINT64CONST(0x100000001b3);
			if (*p == '\0')
				break;
		}
	return psprintf("%016llx-%d", (unsigned long long) h, s->depth);
}

/* Take path out of a list of claims; whether it was there. */
static bool
dl_list_take(List **list, const char *path)
{
	ListCell   *lc;

	foreach(lc, *list)
	{
		if (strcmp(lfirst(lc), path) == 0)
		{
			pfree(lfirst(lc));
			*list = list_delete_cell(*list, lc);
			return true;
		}
	}
	return false;
}

/*
 * Keep a claim this wait may own, in the wait's context, as unsure (its
 * create not answered yet): when the wait ends, after the wait's node, it
 * is deleted only if the ensemble says this session owns it, for another
 * member may have made it.  Made sure (dl_claim_made) once an answer says
 * it is ours.
 */
static void
dl_keep_claim(ZklDlSearch *s, const char *path)
{
	MemoryContext old;
	ListCell   *lc;

	foreach(lc, s->wait->claims)
		if (strcmp(lfirst(lc), path) == 0)
			return;
	foreach(lc, s->wait->unsure)
		if (strcmp(lfirst(lc), path) == 0)
			return;
	old = MemoryContextSwitchTo(s->wait_cxt);
	s->wait->unsure = lappend(s->wait->unsure, pstrdup(path));
	MemoryContextSwitchTo(old);
}

/* A claim kept is ours: deleted when the wait ends, after its node. */
static void
dl_claim_made(ZklDlSearch *s, const char *path)
{
	MemoryContext old;

	if (!dl_list_take(&s->wait->unsure, path))
		return;
	old = MemoryContextSwitchTo(s->wait_cxt);
	s->wait->claims = lappend(s->wait->claims, pstrdup(path));
	MemoryContextSwitchTo(old);
}

/* Let go of a claim kept that this wait did not make. */
static void
dl_forget_claim(ZklDlSearch *s, const char *path)
{
	(void) dl_list_take(&s->wait->unsure, path);
}

/*
 * Claim the cycle's one abort; true if this backend got it.  The claim is
 * made only while every member's node is there (one multi: the create and
 * a check of each), so that a member whose search saw a cycle that a
 * victim has broken since cannot claim it again once the victim's claim
 * is gone.  A claim whose create was not answered may be ours: it is
 * deleted when the wait ends, and a later search that finds it there and
 * owned by this session takes it as this backend's.
 */
static bool
dl_claim(ZklDlSearch *s)
{
	char	   *dir = psprintf("%s/%s", zkl_root, ZKL_CLAIMS_DIR);
	ZklOp	   *mk = zkl_session_create_dir(dir, false);
	const char **checks = palloc(sizeof(char *) * s->depth);
	char	   *path;
	ZklOp	   *stat;
	ZklRc		rc;
	int64		czxid;

	rc = dl_answer(s, mk);
	if (rc != ZKL_RC_OK && rc != ZKL_RC_EXISTS)
		return false;
	path = psprintf("%s/%s", dir, dl_cycle_key(s));
	for (int i = 0; i < s->depth; i++)
		checks[i] = psprintf("%s/%s", s->path[i]->dir, s->path[i]->node);

	/*
	 * Kept before it is sent, so that a cancel while its answer is awaited
	 * still deletes it when the wait ends; let go again where the answer
	 * says it is not ours.
	 */
	dl_keep_claim(s, path);
	rc = dl_answer(s, zkl_session_claim(path, checks, s->depth));
	if (rc == ZKL_RC_OK)
	{
		dl_claim_made(s, path);
		return true;
	}
	if (rc == ZKL_RC_EXISTS)
	{
		stat = zkl_session_stat(path);
		rc = dl_answer(s, stat);
		if (rc == ZKL_RC_OK && zkl_session_op_owned(stat, &czxid))
		{
			dl_claim_made(s, path);
			return true;
		}
		if (rc == ZKL_RC_OK || rc == ZKL_RC_NO_NODE)
			dl_forget_claim(s, path);	/* another session's, or gone */
		return false;
	}
	if (rc != ZKL_RC_CONNECTION_LOST && rc != ZKL_RC_SESSION_LOST)
		dl_forget_claim(s, path);	/* not made */
	return false;
}

/* The 40P01 detail, naming every member as PostgreSQL's detail does. */
static char *
dl_detail(ZklDlSearch *s)
{
	StringInfoData buf;

	initStringInfo(&buf);
	for (int i = 0; i < s->depth; i++)
	{
		ZklDlWaiter   *w = s->path[i];
		ZklDlWaiter   *next = s->path[(i + 1) % s->depth];

		if (i > 0)
			appendStringInfoChar(&buf, '\n');
		appendStringInfo(&buf,
						 "Process %d of cluster \"%s\" waits for ZooKeeper lock \"%s\"; blocked by process %d of cluster \"%s\" (node \"%s\").",
						 w->pid, w->cluster, w->dir, next->pid, next->cluster,
						 w->blocked_by);
	}
	return buf.data;
}

/* Search from me; the detail to raise when this backend is the victim. */
static char *
dl_search(ZklDlSearch *s, ZklDlWaiter *me)
{
	ZklOp	   *op = zkl_session_children(dl_waits_dir());
	char	  **names;
	int			n;

	if (dl_answer(s, op) != ZKL_RC_OK)
		return NULL;
	n = zkl_session_op_children(op, &names);
	for (int i = 0; i < n; i++)
		s->entries = lappend(s->entries, pstrdup(names[i]));
	if (!dl_visit(s, me))
		return NULL;
	for (int i = 0; i < s->depth; i++)
		dl_fill_owner(s, s->path[i]);
	return dl_claim(s) ? dl_detail(s) : NULL;
}

/*
 * Publish this backend's wait: dir is the lock directory, node our
 * waiting node's path, owner the record of its node, to which the entry
 * adds where it waits.  Returns the entry's path (to release when the
 * wait ends) and leaves the create under way in *op.
 */
static char *
dl_publish(const char *dir, const char *node, const ZklOwner *owner,
		   int max_leases, ZklOp **mkdir, ZklOp **op)
{
	const char *child = strrchr(node, '/') + 1;
	ZklOwner	o = *owner;
	char	   *entry;
	char	   *data;
	size_t		len;

	o.waits_dir = dir;
	o.waits_node = child;
	o.has_waits_max_leases = max_leases > 0;
	o.waits_max_leases = max_leases;
	len = zkl_owner_format(&o, NULL, 0);
	data = palloc(len + 1);
	(void) zkl_owner_format(&o, data, len + 1);
	entry = psprintf("%s/%.*s", dl_waits_dir(), ZKL_UUID_LEN,
					 child + strlen(ZKL_PROTECT_PREFIX));
	*mkdir = zkl_session_create_dir(dl_waits_dir(), false);
	*op = zkl_session_create_mark(entry, data);
	return entry;
}

/*
 * Look for a cycle through this backend's wait in dir with node; raise
 * 40P01 if it is found and this backend is the one to end it.  Errors of
 * the search itself (a connection lost meanwhile) find nothing: the wait
 * deals with them.
 */
static void
dl_check(ZklDeadlockWait *w, const char *dir, const char *node,
		 int max_leases)
{
	MemoryContext outer = CurrentMemoryContext;
	MemoryContext cxt = AllocSetContextCreate(outer, "zklock deadlock search",
											  ALLOCSET_DEFAULT_SIZES);
	ZklDlSearch	s;
	ZklDlWaiter   *me;
	char	   *volatile detail = NULL;

	/* A search allocates with the queue's length: all of it goes after. */
	MemoryContextSwitchTo(cxt);
	memset(&s, 0, sizeof(s));
	s.wait = w;
	s.wait_cxt = outer;
	strlcpy(s.own, zkl_session_own_prefix() + strlen(ZKL_PROTECT_PREFIX),
			sizeof(s.own));
	me = palloc0(sizeof(ZklDlWaiter));
	strlcpy(me->session, s.own, sizeof(me->session));
	me->dir = pstrdup(dir);
	me->node = pstrdup(strrchr(node, '/') + 1);
	me->max_leases = max_leases;
	me->cluster = pstrdup(cluster_name ? cluster_name : "");
	me->pid = MyProcPid;

	PG_TRY();
	{
		char	   *found = dl_search(&s, me);

		if (found)
			detail = MemoryContextStrdup(outer, found);
	}
	PG_FINALLY();
	{
		dl_free(&s);
		MemoryContextSwitchTo(outer);
		MemoryContextDelete(cxt);
	}
	PG_END_TRY();
	if (detail)
		ereport(ERROR,
				(errcode(ERRCODE_T_R_DEADLOCK_DETECTED),
				 errmsg("deadlock detected"),
				 errdetail_internal("%s", detail),
				 errhint("Take ZooKeeper locks in one order everywhere, or give the waits a timeout.")));
}

/*
 * The deadlock side of a wait (the lock recipe's and a lease's alike):
 * after deadlock_timeout, publish the wait (once) and search for a cycle
 * through it, then again after 2, 4, 8 and from then on every 16
 * deadlock_timeouts (waits shorter than deadlock_timeout never search).
 * The member whose wait closes a cycle finds it at its first search; the
 * later ones cover members that searched at the same instant.
 */
void
zkl_deadlock_wait_start(ZklDeadlockWait *w)
{
	if (DeadlockTimeout > 0)
		w->next_check = TimestampTzPlusMilliseconds(GetCurrentTimestamp(),
													DeadlockTimeout);
}

/* How long to wait: to the deadline, or to the next search (*search). */
TimestampTz
zkl_deadlock_wait_until(const ZklDeadlockWait *w, TimestampTz deadline,
						bool *search)
{
	*search = w->next_check != 0 && (deadline == 0 || w->next_check < deadline);
	return *search ? w->next_check : deadline;
}

/* The search is due: publish the wait once, search, set the next one. */
void
zkl_deadlock_wait_search(ZklDeadlockWait *w, const char *dir,
						 const char *node, const ZklOwner *owner,
						 int max_leases)
{
	if (w->entry == NULL)
	{
		w->entry = dl_publish(dir, node, owner, max_leases, &w->publish_dir,
							  &w->publish);
		(void) zkl_session_answer(w->publish_dir);
		(void) zkl_session_answer(w->publish);
		zkl_session_op_free(w->publish_dir);
		zkl_session_op_free(w->publish);
		w->publish_dir = w->publish = NULL;
	}
	dl_check(w, dir, node, max_leases);
	w->checks = Min(w->checks + 1, 4);
	w->next_check = TimestampTzPlusMilliseconds(GetCurrentTimestamp(),
												(int64) DeadlockTimeout << w->checks);
}

/*
 * The wait is over, however: let go of its requests, its entry and its
 * claims (a victim's claim once its node is gone: the engine calls this
 * after queuing that node's delete, and the deletes go in that order).
 */
void
zkl_deadlock_wait_end(ZklDeadlockWait *w)
{
	ListCell   *lc;

	zkl_session_op_free(w->publish_dir);
	zkl_session_op_free(w->publish);
	w->publish_dir = w->publish = NULL;
	if (w->entry)
		zkl_session_release(w->entry);
	w->entry = NULL;
	foreach(lc, w->claims)
		zkl_session_release(lfirst(lc));
	foreach(lc, w->unsure)
		zkl_session_delete_if_own(lfirst(lc));
	list_free_deep(w->claims);
	list_free_deep(w->unsure);
	w->claims = w->unsure = NIL;
}

/*
 * One row per node in the way of one published wait; the blockers' data
 * in one pipeline (every get sent, then the answers read).
 */
static List *
dl_wait_rows(ZklDlSearch *s, ZklDlWaiter *w, List *rows)
{
	ZklDlListing  *l;
	int			self = dl_self(s, w, &l);
	char		prefix[sizeof(ZKL_PROTECT_PREFIX) + ZKL_UUID_SESSION_LEN];
	size_t		plen = dl_prefix(w, prefix, sizeof(prefix));
	int			first = list_length(rows);
	int			span = dl_span(l, w, self);
	ZklOp	  **gets = palloc(sizeof(ZklOp *) * Max(span, 1));
	int			n = 0;

	for (int i = 0; i < span; i++)
	{
		ZklWaitRow *row;

		if (!dl_in_way(l, w, self, i, prefix, plen))
			continue;
		row = palloc0(sizeof(ZklWaitRow));
		row->waiter_cluster = w->cluster;
		row->waiter_pid = w->pid;
		row->dir = w->dir;
		row->waiter_node = psprintf("%s/%s", w->dir, w->node);
		row->blocker_node = psprintf("%s/%s", w->dir, l->q.kids[i].name);
		/* Whether the blocker holds, by the recipe's rule seen from outside. */
		row->blocker_holds = w->max_leases > 0 ||
			zkl_names_blocker(l->q.kids, l->q.nkids, i) < 0;
		gets[n++] = dl_keep(s, zkl_session_get(row->blocker_node));
		rows = lappend(rows, row);
	}
	for (int k = 0; k < n; k++)
	{
		ZklWaitRow *row = list_nth(rows, first + k);
		int64		czxid;

		if (zkl_session_answer(gets[k]) == ZKL_RC_OK)
			row->blocker_data = pstrdup(zkl_session_op_data(gets[k], &czxid));
	}
	return rows;
}

/* Every published wait, read and expanded into rows. */
static List *
dl_all_waits(ZklDlSearch *s)
{
	ZklOp	   *op = zkl_session_children(dl_waits_dir());
	char	  **names;
	int			n;
	List	   *rows = NIL;

	if (dl_answer(s, op) != ZKL_RC_OK)
		return NIL;
	n = zkl_session_op_children(op, &names);
	for (int i = 0; i < n; i++)
		s->entries = lappend(s->entries, pstrdup(names[i]));
	for (int i = 0; i < n; i++)
	{
		ZklDlWaiter   *w = dl_read_entry(s, list_nth(s->entries, i));

		if (w != NULL)
			rows = dl_wait_rows(s, w, rows);
	}
	return rows;
}

/*
 * The fleet's published waits, for zk_lock_waits(): one row per waiter and
 * node in its way, with that node's data (its owner when it is zklock's).
 */
List *
zkl_deadlock_waits(void)
{
	ZklDlSearch	s;
	List	   *volatile rows = NIL;

	zkl_session_connect();
	memset(&s, 0, sizeof(s));
	PG_TRY();
	{
		rows = dl_all_waits(&s);
	}
	PG_CATCH();
	{
		dl_free(&s);
		PG_RE_THROW();
	}
	PG_END_TRY();
	dl_free(&s);
	return rows;
}
