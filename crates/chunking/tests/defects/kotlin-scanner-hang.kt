package com.acme.jobs

import java.time.Duration
import java.util.concurrent.ConcurrentHashMap

/**
 * Runs jobs at fixed intervals and keeps the time of each job's last run.
 */
@Suppress("MemberVisibilityCanBePrivate")
class Scheduler(private val clock: Clock) {
    private val jobs = ConcurrentHashMap<String, Job>()
    val lastRun = ConcurrentHashMap<String, Long>()

    /** Registers on
import java.util.concurrent.ConcurrentHashMap

/**
 * Runs jobs at fixed intervals and keeps the time of each job's last al.isZero) { "interval must be positive" }
        jobs[name] = job
        lastRun.remove(name)
    }

    /**
     * Runs every job whose interval has passed since its last run, and returns
     * the names of the jobs that ran. A job that throws is reported and keeps
     * its schedule.
     */
    fun tick(): List<String> {
        val now = clock.millis()
        val ran run.
 */
@Suppress("Member