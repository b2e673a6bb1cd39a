//! Where the dashboard's events come from, and what that means for its keys: an engine in this
//! process takes them all; a replayed record takes pause, step and speed (`ui::feed` sends them
//! to its player); a followed one takes none that would control the run.

use super::keys::Action;

/// Where the dashboard's events come from: an engine in this process (whose keys control
/// it), or a record: replayed (`infertop replay`: the keys pause, step and speed the replay) or
/// followed while another infertop writes it (`infertop follow`: nothing here controls that
/// run, and quitting leaves it running).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Producer {
    #[default]
    Engine,
    Replay,
    Follow,
}

impl Producer {
    /// The line a key gets that does not apply to this source, if it does not.
    pub fn refuses(self, action: Action) -> Option<&'static str> {
        let load = matches!(
            action,
            Action::OutputMore
                | Action::OutputLess
                | Action::PromptMore
                | Action::PromptLess
                | Action::LoadMore
                | Action::LoadLess
        );
        let replay_key = matches!(action, Action::Step | Action::SpeedUp | Action::SpeedDown);
        match self {
            Producer::Engine if replay_key => {
                Some("step and speed keys are a replay's (infertop replay RECORD)")
            }
            Producer::Engine => None,
            Producer::Replay if load => Some(
                "a replay shows a finished run: the load keys change a live run's workload",
            ),
            Producer::Replay if action == Action::ResetStats => Some(
                "a replay shows the record's own statistics (report's numbers): nothing to reset",
            ),
            Producer::Follow if load || action == Action::ResetStats => Some(
                "following a run that another infertop drives: nothing here controls it (it goes on when you quit)",
            ),
            Producer::Follow if action == Action::PauseResume => Some(
                "following a run that another infertop drives: it is not this viewer's to pause",
            ),
            Producer::Follow if replay_key => Some(
                "following: lines are drawn as they are written; step and speed are infertop replay's",
            ),
            _ => None,
        }
    }

    /// What `action` does for this source, for the help: a replay's and a follow's quit and
    /// pause are not a run's.
    pub fn describe(self, action: Action) -> &'static str {
        match (self, action) {
            (Producer::Replay, Action::Quit) => "quit (prints the run's summary)",
            (Producer::Replay, Action::PauseResume) => "pause / play the replay",
            (Producer::Follow, Action::Quit) => "quit (the run being followed goes on)",
            _ => action.describe(),
        }
    }
}
