/*-------------------------------------------------------------------------
 *
 * owner.c
 *	  The owner record of a lock node (the JSON object zklock writes:
 *	  host, port, cluster_name, pid, database, user, application_name,
 *	  acquired_at, and max_leases on a semaphore's nodes) and of a wait
 *	  entry (the same after waits_dir, waits_node and, for a semaphore's
 *	  lease, waits_max_leases): its one formatter, for the nodes and wait
 *	  entries zklock writes, and its one parser, for the fleet views and
 *	  the deadlock search.
 *
 * Node data comes from any client, so nothing here trusts it: the parser
 * accepts exactly RFC 8259 JSON (UTF-8, no NUL), bounds its nesting,
 * never reads past len, and fails softly.  Anything that is not a JSON
 * object gives false, and the view shows the raw data alone; a field of
 * the wrong type is left out.  The formatter escapes strings as
 * PostgreSQL's escape_json does and writes the fields in one fixed order.
 * Plain C, no palloc and no elog, so that the unit tests can fuzz the
 * parser and round-trip the formatter through it (test/unit/test_owner.c).
 *
 *-------------------------------------------------------------------------
 */
#include "owner.h"

#include <stddef.h>
#include <stdio.h>
#include <string.h>

/* Nesting deeper than this is not an owner record. */
#define OWNER_MAX_DEPTH 32

typedef struct OwnerParser
{
	const char *p;
	const char *end;
	char	   *out;			/* next free byte of the caller's buffer */
} OwnerParser;

static bool owner_value(OwnerParser *ps, int depth);

/* Length of the UTF-8 sequence at s (at most len bytes), 0 if invalid. */
static size_t
owner_utf8_char(const unsigned char *s, size_t len)
{
	uint32_t	cp;
	size_t		n;

	if (s[0] < 0x80)
		return s[0] == 0 ? 0 : 1;
	if (s[0] >= 0xC2 && s[0] <= 0xDF)
		n = 2, cp = s[0] & 0x1F;
	else if (s[0] >= 0xE0 && s[0] <= 0xEF)
		n = 3, cp = s[0] & 0x0F;
	else if (s[0] >= 0xF0 && s[0] <= 0xF4)
		n = 4, cp = s[0] & 0x07;
	else
		return 0;
	if (len < n)
		return 0;
	for (size_t i = 1; i < n; i++)
	{
		if ((s[i] & 0xC0) != 0x80)
			return 0;
		cp = (cp << 6) | (s[i] & 0x3F);
	}
	/* Overlong forms, surrogates, beyond U+10FFFF. */
	if ((n == 3 && cp < 0x800) || (n == 4 && cp < 0x10000) ||
		(cp >= 0xD800 && cp <= 0xDFFF) || cp > 0x10FFFF)
		return 0;
	return n;
}

/* Whether s[0..len) is valid UTF-8 without NUL bytes. */
bool
zkl_owner_utf8_valid(const char *s, size_t len)
{
	const unsigned char *u = (const unsigned char *) s;
	size_t		i = 0;

	while (i < len)
	{
		size_t		n = owner_utf8_char(u + i, len - i);

		if (n == 0)
			return false;
		i += n;
	}
	return true;
}

static void
owner_skip_ws(OwnerParser *ps)
{
	while (ps->p < ps->end &&
		   (*ps->p == ' ' || *ps->p == '\t' || *ps->p == '\n' || *ps->p == '\r'))
		ps->p++;
}

static int
owner_hex(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

/* Four hex digits of a \u escape; -1 if they are not. */
static int32_t
owner_u16(OwnerParser *ps)
{
	int32_t		v = 0;

	if (ps->end - ps->p < 4)
		return -1;
	for (int i = 0; i < 4; i++)
	{
		int			h = owner_hex(ps->p[i]);

		if (h < 0)
			return -1;
		v = v * 16 + h;
	}
	ps->p += 4;
	return v;
}

static void
owner_put_utf8(OwnerParser *ps, uint32_t cp)
{
	if (cp < 0x80)
		*ps->out++ = (char) cp;
	else if (cp < 0x800)
	{
		*ps->out++ = (char) (0xC0 | (cp >> 6));
		*ps->out++ = (char) (0x80 | (cp & 0x3F));
	}
	else if (cp < 0x10000)
	{
		*ps->out++ = (char) (0xE0 | (cp >> 12));
		*ps->out++ = (char) (0x80 | ((cp >> 6) & 0x3F));
		*ps->out++ = (char) (0x80 | (cp & 0x3F));
	}
	else
	{
		*ps->out++ = (char) (0xF0 | (cp >> 18));
		*ps->out++ = (char) (0x80 | ((cp >> 12) & 0x3F));
		*ps->out++ = (char) (0x80 | ((cp >> 6) & 0x3F));
		*ps->out++ = (char) (0x80 | (cp & 0x3F));
	}
}

/* A \u escape (after the "\u"), with its low surrogate if it needs one. */
static bool
owner_unicode_escape(OwnerParser *ps)
{
	int32_t		hi = owner_u16(ps);
	int32_t		lo;

	if (hi <= 0)				/* invalid, or U+0000, which text can't hold */
		return false;
	if (hi >= 0xDC00 && hi <= 0xDFFF)
		return false;
	if (hi < 0xD800 || hi > 0xDBFF)
	{
		owner_put_utf8(ps, (uint32_t) hi);
		return true;
	}
	if (ps->end - ps->p < 2 || ps->p[0] != '\\' || ps->p[1] != 'u')
		return false;
	ps->p += 2;
	lo = owner_u16(ps);
	if (lo < 0xDC00 || lo > 0xDFFF)
		return false;
	owner_put_utf8(ps, 0x10000 + (((uint32_t) hi - 0xD800) << 10) +
				   ((uint32_t) lo - 0xDC00));
	return true;
}

/*
 * A string, decoded into the buffer and NUL-terminated; *s points at it.
 * The decoded form is never longer than the quoted source, so the buffer
 * (one byte more than the data) cannot overflow.
 */
static bool
owner_string(OwnerParser *ps, const char **s)
{
	*s = ps->out;
	if (ps->p >= ps->end || *ps->p != '"')
		return false;
	ps->p++;
	while (ps->p < ps->end && *ps->p != '"')
	{
		unsigned char c = (unsigned char) *ps->p;

		if (c < 0x20)
			return false;
		if (c == '\\')
		{
			if (++ps->p >= ps->end)
				return false;
			c = (unsigned char) *ps->p++;
			switch (c)
			{
				case '"':
				case '\\':
				case '/':
					*ps->out++ = (char) c;
					break;
				case 'b':
					*ps->out++ = '\b';
					break;
				case 'f':
					*ps->out++ = '\f';
					break;
				case 'n':
					*ps->out++ = '\n';
					break;
				case 'r':
					*ps->out++ = '\r';
					break;
				case 't':
					*ps->out++ = '\t';
					break;
				case 'u':
					if (!owner_unicode_escape(ps))
						return false;
					break;
				default:
					return false;
			}
		}
		else
		{
			size_t		n = owner_utf8_char((const unsigned char *) ps->p,
											(size_t) (ps->end - ps->p));

			if (n == 0)
				return false;
			memcpy(ps->out, ps->p, n);
			ps->out += n;
			ps->p += n;
		}
	}
	if (ps->p >= ps->end)
		return false;
	ps->p++;
	*ps->out++ = '\0';
	return true;
}

/*
 * A number.  *is_int32 says whether it is an integer (no fraction, no
 * exponent) within int32, with its value in *v.
 */
static bool
owner_number(OwnerParser *ps, bool *is_int32, int32_t *v)
{
	bool		negative = false;
	int64_t		acc = 0;
	bool		fits = true;

	*is_int32 = false;
	if (ps->p < ps->end && *ps->p == '-')
	{
		negative = true;
		ps->p++;
	}
	if (ps->p >= ps->end || *ps->p < '0' || *ps->p > '9')
		return false;
	if (*ps->p == '0')
		ps->p++;
	else
		while (ps->p < ps->end && *ps->p >= '0' && *ps->p <= '9')
		{
			if (acc <= INT32_MAX + 1LL)
				acc = acc * 10 + (*ps->p - '0');
			ps->p++;
		}
	if (ps->p < ps->end && *ps->p == '.')
	{
		fits = false;
		if (++ps->p >= ps->end || *ps->p < '0' || *ps->p > '9')
			return false;
		while (ps->p < ps->end && *ps->p >= '0' && *ps->p <= '9')
			ps->p++;
	}
	if (ps->p < ps->end && (*ps->p == 'e' || *ps->p == 'E'))
	{
		fits = false;
		if (++ps->p < ps->end && (*ps->p == '+' || *ps->p == '-'))
			ps->p++;
		if (ps->p >= ps->end || *ps->p < '0' || *ps->p > '9')
			return false;
		while (ps->p < ps->end && *ps->p >= '0' && *ps->p <= '9')
			ps->p++;
	}
	if (negative)
		acc = -acc;
	if (fits && acc >= INT32_MIN && acc <= INT32_MAX)
	{
		*is_int32 = true;
		*v = (int32_t) acc;
	}
	return true;
}

static bool
owner_literal(OwnerParser *ps, const char *word)
{
	size_t		n = strlen(word);

	if ((size_t) (ps->end - ps->p) < n || memcmp(ps->p, word, n) != 0)
		return false;
	ps->p += n;
	return true;
}

/* An object member's key and the ':' after it, with the space around. */
static bool
owner_key(OwnerParser *ps, const char **key)
{
	if (!owner_string(ps, key))
		return false;
	owner_skip_ws(ps);
	if (ps->p >= ps->end || *ps->p != ':')
		return false;
	ps->p++;
	owner_skip_ws(ps);
	return true;
}

/* An object or array whose contents are not wanted: checked, then dropped. */
static bool
owner_container(OwnerParser *ps, int depth)
{
	char		close = *ps->p == '{' ? '}' : ']';
	char	   *mark = ps->out;
	bool		first = true;

	if (depth >= OWNER_MAX_DEPTH)
		return false;
	ps->p++;
	owner_skip_ws(ps);
	while (ps->p < ps->end && *ps->p != close)
	{
		const char *key;

		if (!first)
		{
			if (*ps->p != ',')
				return false;
			ps->p++;
			owner_skip_ws(ps);
		}
		first = false;
		if (close == '}' && !owner_key(ps, &key))
			return false;
		if (!owner_value(ps, depth + 1))
			return false;
		owner_skip_ws(ps);
		ps->out = mark;
	}
	if (ps->p >= ps->end)
		return false;
	ps->p++;
	return true;
}

/* Any value, dropped. */
static bool
owner_value(OwnerParser *ps, int depth)
{
	const char *s;
	bool		is_int32;
	int32_t		v;

	if (ps->p >= ps->end)
		return false;
	switch (*ps->p)
	{
		case '{':
		case '[':
			return owner_container(ps, depth);
		case '"':
			return owner_string(ps, &s);
		case 't':
			return owner_literal(ps, "true");
		case 'f':
			return owner_literal(ps, "false");
		case 'n':
			return owner_literal(ps, "null");
		default:
			return owner_number(ps, &is_int32, &v);
	}
}

/* The string fields of a record, by key. */
static const struct
{
	const char *key;
	size_t		offset;
}			owner_strings[] = {
	{"host", offsetof(ZklOwner, host)},
	{"cluster_name", offsetof(ZklOwner, cluster_name)},
	{"database", offsetof(ZklOwner, database)},
	{"user", offsetof(ZklOwner, user)},
	{"application_name", offsetof(ZklOwner, application_name)},
	{"acquired_at", offsetof(ZklOwner, acquired_at)},
	{"waits_dir", offsetof(ZklOwner, waits_dir)},
	{"waits_node", offsetof(ZklOwner, waits_node)},
};

/* The integer fields of a record, by key. */
static const struct
{
	const char *key;
	size_t		has;
	size_t		value;
}			owner_ints[] = {
	{"port", offsetof(ZklOwner, has_port), offsetof(ZklOwner, port)},
	{"pid", offsetof(ZklOwner, has_pid), offsetof(ZklOwner, pid)},
	{"max_leases", offsetof(ZklOwner, has_max_leases), offsetof(ZklOwner, max_leases)},
	{"waits_max_leases", offsetof(ZklOwner, has_waits_max_leases),
	offsetof(ZklOwner, waits_max_leases)},
};

/* Which owner field a key names; NULL for the integer and unknown ones. */
static const char **
owner_string_field(ZklOwner *out, const char *key)
{
	for (size_t i = 0; i < sizeof(owner_strings) / sizeof(owner_strings[0]); i++)
		if (strcmp(key, owner_strings[i].key) == 0)
			return (const char **) ((char *) out + owner_strings[i].offset);
	return NULL;
}

/* One member of the top-level object: a known field is kept, the rest dropped. */
static bool
owner_member(OwnerParser *ps, ZklOwner *out)
{
	const char *key;
	const char **field;
	char	   *mark = ps->out;

	if (!owner_key(ps, &key) || ps->p >= ps->end)
		return false;
	field = owner_string_field(out, key);
	if (field != NULL)
	{
		*field = NULL;
		if (*ps->p == '"')
		{
			/* Keep the value; the key's bytes before it are wasted, not reused. */
			return owner_string(ps, field);
		}
	}
	else
	{
		for (size_t i = 0; i < sizeof(owner_ints) / sizeof(owner_ints[0]); i++)
		{
			bool	   *has;
			int32_t    *val;

			if (strcmp(key, owner_ints[i].key) != 0)
				continue;
			has = (bool *) ((char *) out + owner_ints[i].has);
			val = (int32_t *) ((char *) out + owner_ints[i].value);
			*has = false;
			if (*ps->p == '-' || (*ps->p >= '0' && *ps->p <= '9'))
			{
				ps->out = mark;
				return owner_number(ps, has, val);
			}
			break;
		}
	}
	ps->out = mark;
	return owner_value(ps, 1);
}

/*
 * Parse data[0..len) as an owner record into out; strings are decoded
 * into buf, which has ZKL_OWNER_BUF(len) bytes.  False when the data is not
 * a JSON object (out is then all empty).  Duplicate keys: the last wins,
 * as in jsonb.
 */
bool
zkl_owner_parse(const char *data, size_t len, char *buf, ZklOwner *out)
{
	OwnerParser ps = {data, data + len, buf};
	bool		first = true;

	memset(out, 0, sizeof(*out));
	owner_skip_ws(&ps);
	if (ps.p >= ps.end || *ps.p != '{')
		return false;
	ps.p++;
	owner_skip_ws(&ps);
	while (ps.p < ps.end && *ps.p != '}')
	{
		if (!first)
		{
			if (*ps.p != ',')
				break;
			ps.p++;
			owner_skip_ws(&ps);
		}
		first = false;
		if (!owner_member(&ps, out))
			break;
		owner_skip_ws(&ps);
	}
	if (ps.p < ps.end && *ps.p == '}')
	{
		ps.p++;
		owner_skip_ws(&ps);
		if (ps.p == ps.end)
			return true;
	}
	memset(out, 0, sizeof(*out));
	return false;
}

/* Where the formatter writes: at most size bytes of buf, len counts all. */
typedef struct OwnerWriter
{
	char	   *buf;
	size_t		size;
	size_t		len;
} OwnerWriter;

static void
owner_put(OwnerWriter *w, const char *s, size_t n)
{
	for (size_t i = 0; i < n; i++, w->len++)
		if (w->len + 1 < w->size)
			w->buf[w->len] = s[i];
}

/* A JSON string, escaped as PostgreSQL's escape_json escapes it. */
static void
owner_put_string(OwnerWriter *w, const char *s)
{
	owner_put(w, "\"", 1);
	for (; *s; s++)
	{
		char		esc[7];

		switch (*s)
		{
			case '\b':
				owner_put(w, "\\b", 2);
				break;
			case '\f':
				owner_put(w, "\\f", 2);
				break;
			case '\n':
				owner_put(w, "\\n", 2);
				break;
			case '\r':
				owner_put(w, "\\r", 2);
				break;
			case '\t':
				owner_put(w, "\\t", 2);
				break;
			case '"':
				owner_put(w, "\\\"", 2);
				break;
			case '\\':
				owner_put(w, "\\\\", 2);
				break;
			default:
				if ((unsigned char) *s < ' ')
				{
					snprintf(esc, sizeof(esc), "\\u%04x", (unsigned) *s);
					owner_put(w, esc, 6);
				}
				else
					owner_put(w, s, 1);
				break;
		}
	}
	owner_put(w, "\"", 1);
}

/* The key of a member, after a comma unless it is the first. */
static void
owner_put_key(OwnerWriter *w, const char *key)
{
	if (w->len > 1)
		owner_put(w, ",", 1);
	owner_put_string(w, key);
	owner_put(w, ":", 1);
}

static void
owner_put_str_member(OwnerWriter *w, const char *key, const char *value)
{
	if (value == NULL)
		return;
	owner_put_key(w, key);
	owner_put_string(w, value);
}

static void
owner_put_int_member(OwnerWriter *w, const char *key, bool has, int32_t value)
{
	char		num[16];

	if (!has)
		return;
	owner_put_key(w, key);
	owner_put(w, num, (size_t) snprintf(num, sizeof(num), "%d", (int) value));
}

/*
 * Write the record o as JSON into buf (at most size bytes, NUL included,
 * as snprintf does); returns its length, so that a call with size 0 sizes
 * the buffer.  A NULL string and an integer without has_* are left out;
 * a wait entry's fields come first, then the owner's, then max_leases.
 */
size_t
zkl_owner_format(const ZklOwner *o, char *buf, size_t size)
{
	OwnerWriter w = {buf, size, 0};

	owner_put(&w, "{", 1);
	owner_put_str_member(&w, "waits_dir", o->waits_dir);
	owner_put_str_member(&w, "waits_node", o->waits_node);
	owner_put_int_member(&w, "waits_max_leases", o->has_waits_max_leases,
						 o->waits_max_leases);
	owner_put_str_member(&w, "host", o->host);
	owner_put_int_member(&w, "port", o->has_port, o->port);
	owner_put_str_member(&w, "cluster_name", o->cluster_name);
	owner_put_int_member(&w, "pid", o->has_pid, o->pid);
	owner_put_str_member(&w, "database", o->database);
	owner_put_str_member(&w, "user", o->user);
	owner_put_str_member(&w, "application_name", o->application_name);
	owner_put_str_member(&w, "acquired_at", o->acquired_at);
	owner_put_int_member(&w, "max_leases", o->has_max_leases, o->max_leases);
	owner_put(&w, "}", 1);
	if (size > 0)
		buf[w.len < size ? w.len : size - 1] = '\0';
	return w.len;
}
