//! A bounded ring buffer for the sparkline histories: a run can go on for days, so everything
//! that grows with run length keeps only what can be drawn.

use std::collections::VecDeque;

#[derive(Clone, Debug)]
pub struct Ring<T> {
    capacity: usize,
    items: VecDeque<T>,
    /// Items ever pushed (not reset by `clear`): the newest is number `pushed - 1`, which
    /// fixes its column in a chart that does not scroll.
    pushed: u64,
}

impl<T> Ring<T> {
    pub fn new(capacity: usize) -> Self {
        let capacity = capacity.max(1);
        Self {
            capacity,
            items: VecDeque::with_capacity(capacity),
            pushed: 0,
        }
    }

    /// Appends, dropping the oldest item when full.
    pub fn push(&mut self, item: T) {
        if self.items.len() == self.capacity {
            self.items.pop_front();
        }
        self.items.push_back(item);
        self.pushed += 1;
    }

    /// The number of the newest item (counted from 0 over all pushes), if any was pushed.
    pub fn newest_number(&self) -> u64 {
        self.pushed.saturating_sub(1)
    }

    pub fn len(&self) -> usize {
        self.items.len()
    }

    pub fn is_empty(&self) -> bool {
        self.items.is_empty()
    }

    pub fn capacity(&self) -> usize {
        self.capacity
    }

    pub fn clear(&mut self) {
        self.items.clear();
    }

    pub fn last(&self) -> Option<&T> {
        self.items.back()
    }

    /// The newest item, to change in place (an events line that counts a burst).
    pub fn last_mut(&mut self) -> Option<&mut T> {
        self.items.back_mut()
    }

    /// The newest `n` items, oldest first: exactly what a sparkline `n` cells wide shows.
    pub fn last_n(&self, n: usize) -> impl DoubleEndedIterator<Item = &T> + ExactSizeIterator {
        self.items.range(self.items.len().saturating_sub(n)..)
    }

    /// All items, oldest first.
    pub fn iter(&self) -> impl DoubleEndedIterator<Item = &T> + ExactSizeIterator {
        self.items.iter()
    }
}

#[cfg(test)]
mod tests {
    use super::Ring;

    #[test]
    fn keeps_only_the_newest_items() {
        let mut r = Ring::new(3);
        for i in 0..5 {
            r.push(i);
        }
        assert_eq!(r.iter().copied().collect::<Vec<_>>(), [2, 3, 4]);
        assert_eq!(r.last_n(2).copied().collect::<Vec<_>>(), [3, 4]);
        assert_eq!(r.last_n(10).count(), 3);
        assert_eq!(r.last(), Some(&4));
        assert_eq!(r.newest_number(), 4);
        if let Some(v) = r.last_mut() {
            *v = 7;
        }
        assert_eq!(r.iter().copied().collect::<Vec<_>>(), [2, 3, 7]);
        r.clear();
        r.push(9);
        assert_eq!(r.newest_number(), 5);
    }
}
