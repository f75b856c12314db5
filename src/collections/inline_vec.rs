//! A list of plain values kept on the stack while it is short and moved to the heap when it
//! grows past `N`: hot commands handle one or a few arguments, members or sums, and an
//! allocation through the server's allocator costs more than the rest of such a step.
//!
//! Owns: that data structure. May not touch: Redis (pure).

use std::ops::Deref;

pub struct InlineVec<T: Copy + Default, const N: usize> {
    inline: [T; N],
    /// Items in `inline`, while `heap` is empty.
    len: usize,
    /// Every item, once there were more than `N`.
    heap: Vec<T>,
}

impl<T: Copy + Default, const N: usize> Default for InlineVec<T, N> {
    fn default() -> Self {
        InlineVec {
            inline: [T::default(); N],
            len: 0,
            heap: Vec::new(),
        }
    }
}

impl<T: Copy + Default, const N: usize> InlineVec<T, N> {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn push(&mut self, item: T) {
        if self.heap.is_empty() {
            if let Some(slot) = self.inline.get_mut(self.len) {
                *slot = item;
                self.len += 1;
                return;
            }
            self.heap.reserve(N * 2);
            self.heap
                .extend_from_slice(self.inline.get(..self.len).unwrap_or_default());
        }
        self.heap.push(item);
    }

    pub fn extend_from_slice(&mut self, items: &[T]) {
        let end = self.len + items.len();
        if self.heap.is_empty() {
            if let Some(free) = self.inline.get_mut(self.len..end) {
                free.copy_from_slice(items);
                self.len = end;
                return;
            }
            self.heap.reserve(end.max(N * 2));
            self.heap
                .extend_from_slice(self.inline.get(..self.len).unwrap_or_default());
        }
        self.heap.extend_from_slice(items);
    }

    pub fn as_slice(&self) -> &[T] {
        if self.heap.is_empty() {
            self.inline.get(..self.len).unwrap_or_default()
        } else {
            &self.heap
        }
    }
}

impl<T: Copy + Default, const N: usize> Deref for InlineVec<T, N> {
    type Target = [T];
    fn deref(&self) -> &[T] {
        self.as_slice()
    }
}

impl<const N: usize> AsRef<[u8]> for InlineVec<u8, N> {
    fn as_ref(&self) -> &[u8] {
        self.as_slice()
    }
}

impl<T: Copy + Default + std::fmt::Debug, const N: usize> std::fmt::Debug for InlineVec<T, N> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.as_slice()).finish()
    }
}

impl<T: Copy + Default + PartialEq, const N: usize> PartialEq for InlineVec<T, N> {
    fn eq(&self, other: &Self) -> bool {
        self.as_slice() == other.as_slice()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Pushes and slice appends of any length keep every item in order, across the move
    /// from the stack to the heap.
    #[test]
    fn keeps_every_item_in_order_on_stack_and_heap() {
        for total in 0..40usize {
            let mut list: InlineVec<u32, 4> = InlineVec::new();
            let mut plain = Vec::new();
            for i in 0..total as u32 {
                if i % 3 == 2 {
                    list.extend_from_slice(&[i, i + 100]);
                    plain.extend_from_slice(&[i, i + 100]);
                } else {
                    list.push(i);
                    plain.push(i);
                }
                assert_eq!(list.as_slice(), plain.as_slice(), "after {i} of {total}");
            }
            assert_eq!(list.len(), plain.len());
            assert_eq!(list.heap.is_empty(), plain.len() <= 4);
        }
    }
}
