//! The five papers attnflow implements, in one place: every scenario kind names its paper by
//! number ([`crate::scenario::registry::ScenarioKind::paper`]), and the report and the README
//! cite them from this table (title, authors, where it appeared).

/// A paper, as cited in the report.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Paper {
    /// The seed number the scenario kinds use, `000` … `004`.
    pub number: &'static str,
    pub title: &'static str,
    pub authors: &'static str,
    /// Where it appeared (or that it is an anonymous submission), with its arXiv id if any.
    pub venue: &'static str,
    /// Its public page (arXiv abstract); `None` for an anonymous submission, whose forum
    /// attnflow cannot verify.
    pub url: Option<&'static str>,
    /// What attnflow models from it, in a few words (the README's section headings).
    pub topic: &'static str,
}

/// Every paper, in seed order.
pub const PAPERS: [Paper; 5] = [
    Paper {
        number: "000",
        title: "Towards analyzing self-attention via linear neural networks",
        authors: "Anonymous authors",
        venue: "Submitted under double-blind review (ICLR-style)",
        url: None,
        topic: "linear self-attention on histogram tasks (df-linear networks)",
    },
    Paper {
        number: "001",
        title: "Implicit regularization of gradient flow on one-layer softmax attention",
        authors: "Heejune Sheen, Siyu Chen, Tianhao Wang, Harrison H. Zhou",
        venue: "arXiv:2403.08699, 2024",
        url: Some("https://arxiv.org/abs/2403.08699"),
        topic: "separately trained K and Q, and gradient flow's implicit nuclear-norm bias",
    },
    Paper {
        number: "002",
        title: "Gradient descent and attention models: challenges posed by the softmax function",
        authors: "Anonymous authors",
        venue: "Submitted under double-blind review (ICLR-style)",
        url: None,
        topic: "how softmax attention makes gradient descent ill-conditioned",
    },
    Paper {
        number: "003",
        title: "Implicit bias and fast convergence rates for self-attention",
        authors: "Bhavya Vasudeva, Puneesh Deora, Christos Thrampoulidis",
        venue: "arXiv:2402.05738 (TMLR 2025)",
        url: Some("https://arxiv.org/abs/2402.05738"),
        topic: "implicit bias of self-attention toward the W-SVM",
    },
    Paper {
        number: "004",
        title: "Transformers learn through gradual rank increase",
        authors: "Enric Boix-Adserà, Etai Littwin, Emmanuel Abbe, Samy Bengio, Joshua Susskind",
        venue: "NeurIPS 2023 (arXiv:2306.07042)",
        url: Some("https://arxiv.org/abs/2306.07042"),
        topic: "incremental (stagewise) learning of diagonal networks and attention heads",
    },
];

/// The paper with seed number `number` (as a kind's `paper()` returns it).
pub fn paper(number: &str) -> Option<&'static Paper> {
    PAPERS.iter().find(|p| p.number == number)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scenario::registry::Registry;

    #[test]
    fn every_kind_names_a_paper_of_the_table() {
        for kind in Registry::builtin().kinds() {
            assert!(
                paper(kind.paper()).is_some(),
                "{}: paper {}",
                kind.name(),
                kind.paper()
            );
        }
    }
}
