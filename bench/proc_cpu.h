/*
 * proc_cpu.h - CPU time of a process, for the benchmark's drivers
 * (pg_client.c, zk_floor.c): a static function, included by each.
 */
#ifndef BENCH_PROC_CPU_H
#define BENCH_PROC_CPU_H

#include <stdio.h>
#include <string.h>
#include <unistd.h>

/*
 * CPU time (user + system, all threads) a process has used, in
 * microseconds, from /proc/PID/stat (0: self); -1 when unreadable.
 */
static double
cpu_us(int pid)
{
	char		path[64],
				buf[1024],
			   *p;
	unsigned long utime,
				stime;
	FILE	   *f;
	size_t		n;

	if (pid == 0)
		snprintf(path, sizeof(path), "/proc/self/stat");
	else
		snprintf(path, sizeof(path), "/proc/%d/stat", pid);
	if (!(f = fopen(path, "r")))
		return -1;
	n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = '\0';
	/* fields after the command's closing parenthesis: state is the 3rd */
	if (!(p = strrchr(buf, ')')) ||
		sscanf(p + 1, " %*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %lu %lu",
			   &utime, &stime) != 2)
		return -1;
	return (double) (utime + stime) * 1e6 / sysconf(_SC_CLK_TCK);
}

#endif							/* BENCH_PROC_CPU_H */
