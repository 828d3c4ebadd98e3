// SPDX-License-Identifier: GPL-2.0
/*
 * kdiag_io: the SO2 profiling lab's 1-io module, bounded. A timer callback
 * runs in softirq context and busy-waits spin_ms out of every period_ms,
 * starting delay_s after loading and stopping lifetime_s later. One CPU
 * stutters while no process looks busy: the time shows as softirq (si in
 * top), charged to no task, and the load average stays low.
 */
#include <linux/jiffies.h>
#include <linux/kernel.h>
#include <linux/module.h>
#include <linux/timer.h>
#include <linux/version.h>

static unsigned int spin_ms = 1000;
module_param(spin_ms, uint, 0444);
MODULE_PARM_DESC(spin_ms, "busy-wait per firing in ms (at most 1000)");

static unsigned int period_ms = 2000;
module_param(period_ms, uint, 0444);
MODULE_PARM_DESC(period_ms, "time between firings in ms (more than spin_ms)");

static unsigned int delay_s = 5;
module_param(delay_s, uint, 0444);
MODULE_PARM_DESC(delay_s, "seconds before the first firing");

static unsigned int lifetime_s = 60;
module_param(lifetime_s, uint, 0444);
MODULE_PARM_DESC(lifetime_s, "seconds of firing before the timer stops re-arming");

static struct timer_list kdiag_io_timer;
static unsigned long kdiag_io_end;

/* noinline: profiles must name it, as they named the original's handler. */
static noinline void kdiag_io_timer_handler(struct timer_list *t)
{
	unsigned long until = jiffies + msecs_to_jiffies(min(spin_ms, 1000U));

	/* jiffies still advances: hard interrupts (the tick) preempt softirqs. */
	while (time_before(jiffies, until))
		cpu_relax();
	if (time_before(jiffies, kdiag_io_end))
		mod_timer(&kdiag_io_timer, jiffies + msecs_to_jiffies(period_ms));
}

static int __init kdiag_io_init(void)
{
	if (period_ms <= min(spin_ms, 1000U))
		return -EINVAL;
	timer_setup(&kdiag_io_timer, kdiag_io_timer_handler, 0);
	kdiag_io_end = jiffies + (unsigned long)(delay_s + lifetime_s) * HZ;
	mod_timer(&kdiag_io_timer, jiffies + (unsigned long)delay_s * HZ);
	return 0;
}

static void __exit kdiag_io_exit(void)
{
#if LINUX_VERSION_CODE >= KERNEL_VERSION(6, 2, 0)
	timer_delete_sync(&kdiag_io_timer);
#else
	del_timer_sync(&kdiag_io_timer);
#endif
}

module_init(kdiag_io_init);
module_exit(kdiag_io_exit);
MODULE_DESCRIPTION("kdiag: a timer that busy-waits in softirq context (SO2 lab 1-io)");
MODULE_LICENSE("GPL");
