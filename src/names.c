/*-------------------------------------------------------------------------
 *
 * names.c
 *	  Lock name <-> znode name escaping, contender child-name parsing,
 *	  ordering and the "who blocks me" decision of the lock recipe.
 *
 * Plain C on purpose: no palloc, no elog, callers pass the buffers.  That
 * keeps these rules unit-testable (test/unit/test_names.c) and safe to call
 * from a ZooKeeper thread.
 *
 * Ordering follows ZooKeeper's sequence suffix ("%010d" of the parent's
 * int32 cversion), compared with serial-number arithmetic so that the wrap
 * of the counter to negative numbers keeps the order.  Any prefix is
 * accepted, so nodes of Curator (lock-, __READ__, __WRIT__) and kazoo
 * (__lock__, __rlock__) take part in the same queue.
 *
 *-------------------------------------------------------------------------
 */
#include "names.h"

#include <stdlib.h>
#include <string.h>

static const char zkl_hex[] = "0123456789ABCDEF";

/* Bytes that stand for themselves in a znode name; all others are %XX. */
static bool
names_is_plain(unsigned char c)
{
	return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') ||
		(c >= '0' && c <= '9') || c == '_' || c == '-';
}

/*
 * Escape a lock name into one znode name component.  The result holds only
 * [A-Za-z0-9_%-], so it is never '.', '..' or more than one component, and
 * it decodes back to the same bytes.  out needs 3 * len + 1 bytes; returns
 * the length.
 */
size_t
zkl_names_escape(const char *name, size_t len, char *out)
{
	size_t		o = 0;

	for (size_t i = 0; i < len; i++)
	{
		unsigned char c = (unsigned char) name[i];

		if (names_is_plain(c))
			out[o++] = (char) c;
		else
		{
			out[o++] = '%';
			out[o++] = zkl_hex[c >> 4];
			out[o++] = zkl_hex[c & 0xF];
		}
	}
	out[o] = '\0';
	return o;
}

static int
names_hex_value(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

/*
 * The name a lock directory's znode name stands for: an escaped text name
 * decoded (into out, room for strlen(component) + 1 bytes; *len its
 * length, which may hold NUL bytes no name has), or an integer key's
 * "key:..." as it is.  False when zklock would never have made this
 * directory for any name: an escape that is not the one zklock writes, a
 * byte it would have escaped, or nothing at all.
 */
bool
zkl_names_unescape(const char *component, char *out, size_t *len)
{
	size_t		o = 0;
	size_t		n = strlen(component);

	if (n == 0)
		return false;
	if (strncmp(component, "key:", 4) == 0)
	{
		int			colons = 0;

		for (size_t i = 4; i < n; i++)
		{
			if (component[i] == ':')
				colons++;
			else if (!((component[i] >= '0' && component[i] <= '9') ||
					   (component[i] == '-' && (i == 4 || component[i - 1] == ':'))))
				return false;
		}
		if (colons > 1 || component[n - 1] == ':' || component[n - 1] == '-' ||
			component[4] == ':')
			return false;
		memcpy(out, component, n + 1);
		*len = n;
		return true;
	}
	for (size_t i = 0; i < n; i++)
	{
		unsigned char c = (unsigned char) component[i];

		if (c == '%')
		{
			int			hi = names_hex_value(component[i + 1]);
			int			lo = hi >= 0 ? names_hex_value(component[i + 2]) : -1;
			unsigned char v;

			if (hi < 0 || lo < 0)
				return false;
			v = (unsigned char) (hi << 4 | lo);
			if (names_is_plain(v))
				return false;	/* zklock writes plain bytes plain */
			out[o++] = (char) v;
			i += 2;
		}
		else if (names_is_plain(c))
			out[o++] = (char) c;
		else
			return false;
	}
	out[o] = '\0';
	*len = o;
	return o <= ZKL_NAME_MAX_BYTES;
}

static bool
names_ends_with(const char *s, size_t len, const char *suffix)
{
	size_t		sl = strlen(suffix);

	return len >= sl && memcmp(s + len - sl, suffix, sl) == 0;
}

/*
 * Parse a sequence suffix: ten digits, or '-' and nine or ten digits (a
 * wrapped counter printed with "%010d").  Returns false if it is not one.
 */
static bool
names_parse_seq(const char *s, int32_t *seq)
{
	bool		negative = s[0] == '-';
	const char *d = negative ? s + 1 : s;
	size_t		len = strlen(d);
	int64_t		v = 0;

	if (len != 10 && !(negative && len == 9))
		return false;
	for (size_t i = 0; i < len; i++)
	{
		if (d[i] < '0' || d[i] > '9')
			return false;
		v = v * 10 + (d[i] - '0');
	}
	if (negative)
		v = -v;
	if (v < INT32_MIN || v > INT32_MAX)
		return false;
	*seq = (int32_t) v;
	return true;
}

/*
 * Where the sequence suffix of a child starts.  After the last known
 * marker (ours and Curator's "lock-", "__READ__", "__WRIT__", kazoo's
 * "__lock__", "__rlock__"), so that "lock--2147483647" reads as a wrapped
 * counter; for other names, the last ten characters, or eleven when a
 * second '-' shows the first is the counter's sign.
 */
static const char *
names_seq_start(const char *child, size_t len, bool *known)
{
	static const char *const markers[] = {"lock-", "__READ__", "__WRIT__",
	"__lock__", "__rlock__"};
	const char *best = NULL;

	for (size_t m = 0; m < sizeof(markers) / sizeof(markers[0]); m++)
	{
		const char *p = child;
		const char *hit;

		while ((hit = strstr(p, markers[m])) != NULL)
		{
			const char *after = hit + strlen(markers[m]);

			if (best == NULL || after > best)
				best = after;
			p = hit + 1;
		}
	}
	*known = best != NULL && len - (size_t) (best - child) <= 11;
	if (*known)
		return best;
	if (len >= 12 && child[len - 11] == '-' && child[len - 12] == '-')
		return child + len - 11;
	return len >= 10 ? child + len - 10 : NULL;
}

/*
 * Parse a lock directory child.  Returns false for a child without a
 * sequence suffix (it takes no part in the queue).  A child is ours when
 * it starts with own_prefix (may be NULL).
 */
bool
zkl_names_parse_child(const char *child, const char *own_prefix, ZklChild *out)
{
	size_t		len = strlen(child);
	bool		known;
	const char *seq = names_seq_start(child, len, &known);
	size_t		plen;

	if (seq == NULL || !names_parse_seq(seq, &out->seq))
		return false;
	plen = (size_t) (seq - child);
	out->name = child;
	out->shared = names_ends_with(child, plen, "__READ__") ||
		names_ends_with(child, plen, "__rlock__");
	out->ours = own_prefix != NULL &&
		strncmp(child, own_prefix, strlen(own_prefix)) == 0;
	out->known = known;
	out->czxid = 0;
	return true;
}

/*
 * Serial-number comparison of two sequence numbers (RFC 1982 style): a
 * negative result means a was created before b, also across the wrap of
 * the int32 counter.
 */
int
zkl_names_seq_cmp(int32_t a, int32_t b)
{
	int32_t		d = (int32_t) ((uint32_t) a - (uint32_t) b);

	return (d > 0) - (d < 0);
}

static int
names_child_cmp(const void *a, const void *b)
{
	const ZklChild *ca = (const ZklChild *) a;
	const ZklChild *cb = (const ZklChild *) b;
	int			c = zkl_names_seq_cmp(ca->seq, cb->seq);

	if (c != 0)
		return c;
	return (ca->czxid > cb->czxid) - (ca->czxid < cb->czxid);
}

/*
 * Sort children into queue order: by sequence number, and equal sequence
 * numbers by creation (czxid).  ZooKeeper 3.8.0 stops counting at INT32_MAX
 * instead of wrapping and hands that suffix out again; the rest of a name
 * is a random uuid, so ordering ties by name would let a newcomer sort
 * ahead of the holder.  The caller fills in czxid of tied children (see
 * zkl_names_tied) and sorts again.
 */
void
zkl_names_sort(ZklChild *children, int n)
{
	qsort(children, (size_t) n, sizeof(ZklChild), names_child_cmp);
}

/* Whether sorted[i] shares its sequence number with a neighbour. */
bool
zkl_names_tied(const ZklChild *sorted, int n, int i)
{
	return (i > 0 && sorted[i - 1].seq == sorted[i].seq) ||
		(i + 1 < n && sorted[i + 1].seq == sorted[i].seq);
}

/*
 * Text uuid of one contender node: ten bytes fixed for the session, then a
 * 32-bit per-create counter, laid out as 8-4-4-4-12 hex digits like the
 * uuids Curator puts in its protection prefix.
 */
void
zkl_names_format_uuid(const unsigned char session_bytes[10], uint32_t counter,
					  char out[ZKL_UUID_LEN + 1])
{
	unsigned char b[16];
	int			o = 0;

	memcpy(b, session_bytes, 10);
	b[10] = 0;
	b[11] = 0;
	b[12] = (unsigned char) (counter >> 24);
	b[13] = (unsigned char) (counter >> 16);
	b[14] = (unsigned char) (counter >> 8);
	b[15] = (unsigned char) counter;
	for (int i = 0; i < 16; i++)
	{
		if (i == 4 || i == 6 || i == 8 || i == 10)
			out[o++] = '-';
		out[o++] = "0123456789abcdef"[b[i] >> 4];
		out[o++] = "0123456789abcdef"[b[i] & 0xF];
	}
	out[o] = '\0';
}

/*
 * The recipe's decision for sorted[self]: the index of the node it must
 * wait for, or -1 when it holds the lock.  An exclusive contender waits for
 * its nearest earlier foreign node; a shared one for its nearest earlier
 * foreign exclusive node.  Our own nodes never block us: they are all held
 * (a backend waits for one lock at a time), as PostgreSQL lets a session
 * take a lock in exclusive mode while it holds it in shared mode.  Waiting
 * on the nearest blocker only (not the first) is what avoids the herd.
 */
int
zkl_names_blocker(const ZklChild *sorted, int n, int self)
{
	(void) n;
	for (int i = self - 1; i >= 0; i--)
	{
		if (sorted[i].ours)
			continue;
		if (!sorted[self].shared || !sorted[i].shared)
			return i;
	}
	return -1;
}

/*
 * Whether the deletion of sorted[blocker] alone hands the lock to
 * sorted[self], so that a waiter woken by it may hold without listing the
 * directory again.  True when blocker is the only node before self that
 * blocks it: later creates get higher sequence numbers, so nothing can
 * appear ahead.  False wherever that reasoning does not hold: another
 * earlier node blocks too (a predecessor that was not the head, a shared
 * waiter behind several exclusive nodes), equal sequence numbers (the
 * saturated counter hands them out again), or an earlier node whose name
 * no known lock recipe makes: a directory where an unknown client writes
 * is not trusted to follow the counter.  (This sees only the nodes of the
 * listing: a client that later creates a low-numbered name by hand, in a
 * directory that looked clean, defeats it, as it defeats every listing.)
 */
bool
zkl_names_handoff(const ZklChild *sorted, int n, int self, int blocker)
{
	if (blocker < 0 || blocker >= self || self >= n)
		return false;
	for (int i = 0; i <= self; i++)
	{
		if (!sorted[i].known || zkl_names_tied(sorted, n, i))
			return false;
		if (i == blocker || i == self || sorted[i].ours)
			continue;
		if (!sorted[self].shared || !sorted[i].shared)
			return false;
	}
	return true;
}

/*
 * The ZooKeeper-session part of a zklock node's uuid ("_c_" and the first
 * ZKL_UUID_SESSION_LEN characters of the uuid), which every node of one
 * backend's session shares.  False for names that do not have that form
 * (other clients, and Curator's per-create protection uuids, which then
 * name no session that publishes a wait).
 */
bool
zkl_names_session_of(const char *child, char out[ZKL_UUID_SESSION_LEN + 1])
{
	size_t		plen = strlen(ZKL_PROTECT_PREFIX);

	if (strncmp(child, ZKL_PROTECT_PREFIX, plen) != 0 ||
		strlen(child) < plen + ZKL_UUID_LEN)
		return false;
	memcpy(out, child + plen, ZKL_UUID_SESSION_LEN);
	out[ZKL_UUID_SESSION_LEN] = '\0';
	return true;
}
