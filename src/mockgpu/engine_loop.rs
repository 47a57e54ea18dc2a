//! The scheduling loop every software GPU thread runs (the AMD one in `gpu/`, the NVIDIA one in
//! `nvgpu/`): round-robin over the attached queues or channels, each allowed a budget of work per
//! turn, sleeping on the message channel when nothing can progress (with a poll interval while
//! something waits on memory the CPU may change).
//!
//! Not guaranteed: fairness beyond round-robin turns; latency below the poll interval for a wait
//! released by a CPU write that does not also send `Msg::Wake`.

use std::time::Duration;

use crossbeam::channel::{Receiver, RecvTimeoutError, Sender};

/// What one turn of a queue or channel did.
pub(crate) enum RunResult {
    /// Executed something.
    Progress,
    /// Blocked on a wait that memory may release later.
    Waiting,
    /// Nothing to do (empty ring, or stopped by a fault).
    Idle,
}

/// A queue or channel the loop drives.
pub(crate) trait EngineRunner: Send + 'static {
    /// The identity `Msg::Remove` refers to.
    type Id: PartialEq + Send;
    fn id(&self) -> Self::Id;
    /// Execute at most `budget` units of work.
    fn run(&mut self, budget: usize) -> RunResult;
}

/// What the device side sends to its GPU thread.
pub(crate) enum Msg<R: EngineRunner> {
    /// Start driving a runner.
    Add(Box<R>),
    /// Stop driving the runner with this id; the ack is sent once it is dropped.
    Remove(R::Id, Sender<()>),
    /// New work was published (a doorbell).
    Wake,
    /// End the thread.
    Shutdown,
}

/// Apply one message; `false` when the thread must end.
fn handle<R: EngineRunner>(m: Msg<R>, runners: &mut Vec<R>) -> bool {
    match m {
        Msg::Add(r) => runners.push(*r),
        Msg::Remove(id, ack) => {
            runners.retain(|r| r.id() != id);
            let _ = ack.send(());
        }
        Msg::Wake => {}
        Msg::Shutdown => return false,
    }
    true
}

/// The GPU thread's body: runs until `Msg::Shutdown` or until every sender is gone.
pub(crate) fn run_engines<R: EngineRunner>(rx: Receiver<Msg<R>>, budget: usize, poll: Duration) {
    let mut runners: Vec<R> = Vec::new();
    loop {
        while let Ok(m) = rx.try_recv() {
            if !handle(m, &mut runners) {
                return;
            }
        }
        let (mut progressed, mut waiting) = (false, false);
        for r in runners.iter_mut() {
            match r.run(budget) {
                RunResult::Progress => progressed = true,
                RunResult::Waiting => waiting = true,
                RunResult::Idle => {}
            }
        }
        if progressed {
            continue;
        }
        let m = if waiting {
            match rx.recv_timeout(poll) {
                Ok(m) => m,
                Err(RecvTimeoutError::Timeout) => continue,
                Err(RecvTimeoutError::Disconnected) => return,
            }
        } else {
            match rx.recv() {
                Ok(m) => m,
                Err(_) => return,
            }
        };
        if !handle(m, &mut runners) {
            return;
        }
    }
}
