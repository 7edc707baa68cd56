/* timeline_dag.c - the dependency graph (--dag) as a cgraph graph that
 * Graphviz's "dot" engine lays out: one cluster per rank, the actions
 * filled as on the timeline, every edge styled by the DAG rule that
 * produced it, and a legend of the rules. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "canvas_internal.h"
#include "timeline_internal.h"

static const struct {
    unsigned char rule;
    const char *name, *colour, *style, *penwidth;
} rule_styles[] = {
    /* In priority order: an edge from several rules is drawn as the first. */
    {TF_EDGE_FORWARD_NEXT_STAGE, "forward to next stage", "#2f6eb5", "solid", "1.4"},
    {TF_EDGE_BACKWARD_PREV_STAGE, "backward to previous stage", "#c43c3e", "solid", "1.4"},
    {TF_EDGE_BACKWARD_AFTER_FORWARD, "backward after forward", "#8e44ad", "dashed", "1.2"},
    {TF_EDGE_MICROBATCH, "next microbatch", "#8c8c8c", "dotted", "1.2"},
    {TF_EDGE_PAIR, "overlapped pair (joins it, or enters or leaves it as one node)", "#333333",
     "bold", "2"},
    {TF_EDGE_RANK_ORDER, "rank order", "#b0b0b0", "solid", "1"},
};
enum { N_RULES = sizeof rule_styles / sizeof *rule_styles };

/* The graph's title (the timeline's two lines) and the attributes every
 * cluster, node and edge of the dependency graph starts from. */
static void set_graph_defaults(Agraph_t *g, const tl_model *m, const tf_timeline_options *opt)
{
    char line1[512], line2[512], escaped[512], title[1100];
    tl_title_lines(m, opt, line1, line2, sizeof line1);
    /* Two left-justified lines ("\\l" ends a left-justified line). */
    int used = snprintf(title, sizeof title, "%s\\l", tl_label_escape(line1, escaped, sizeof escaped));
    snprintf(title + used, sizeof title - (size_t)used, "%s\\l",
             tl_label_escape(line2, escaped, sizeof escaped));
    agattr(g, AGRAPH, "rankdir", "LR");
    agattr(g, AGRAPH, "newrank", "true");
    agattr(g, AGRAPH, "nodesep", "0.12");
    agattr(g, AGRAPH, "ranksep", "0.35");
    agattr(g, AGRAPH, "labelloc", "t");
    agattr(g, AGRAPH, "labeljust", "l");
    agattr(g, AGRAPH, "fontsize", "11");
    /* Graph attributes declared here are also the clusters' defaults. */
    agattr(g, AGRAPH, "label", "");
    agattr(g, AGRAPH, "style", "filled");
    agattr(g, AGRAPH, "fillcolor", "#f6f6f6");
    agattr(g, AGRAPH, "color", "#dddddd");
    agset(g, "label", title);
    agset(g, "fontsize", "13");
    agattr(g, AGNODE, "fixedsize", "false");
    agattr(g, AGNODE, "width", "0.45");
    agattr(g, AGNODE, "height", "0.3");
    agattr(g, AGNODE, "fontsize", "10");
    agattr(g, AGNODE, "margin", "0.04,0.02");
    agattr(g, AGEDGE, "color", "#b0b0b0");
    agattr(g, AGEDGE, "style", "solid");
    agattr(g, AGEDGE, "penwidth", "1");
    agattr(g, AGEDGE, "arrowsize", "0.6");
    agattr(g, AGEDGE, "id", "");
    agattr(g, AGEDGE, "class", "");
    agattr(g, AGEDGE, "tooltip", "");
}

/* Action i of panel p as a node of cluster, filled and outlined as on the
 * timeline. */
static Agnode_t *draw_dag_node(Agraph_t *cluster, const tl_model *m, const tl_panel *p, int i)
{
    const tf_schedule *s = &m->plan->schedule;
    const tf_action *a = &s->actions[i];
    char cell[32], fill[8], text[256];
    tf_action_format(a, cell);
    Agnode_t *n = agnode(cluster, cell, 1);
    if (s->stages_per_rank > 1)
        tl_set(n, "label", cell);
    else
        tl_setf(n, "label", "%c%d", tf_action_letter(a->type), a->microbatch);
    tl_set(n, "fillcolor", tl_action_fill(m, i, p->ratio[i], fill));
    tl_set(n, "fontcolor", tf_canvas_luminance(fill) > 0.6 ? "#1b1b1b" : "#ffffff");
    tl_set(n, "color", p->critical[i] ? "#1b1b1b" : "#ffffff");
    tl_set(n, "penwidth", p->critical[i] ? "1.6" : "0.6");
    tl_setf(n, "id", "%s_%s", p->id_prefix, cell);
    tl_setf(n, "class", "action %c%s", tf_action_letter(a->type), p->critical[i] ? " critical" : "");
    snprintf(text, sizeof text, "%s: start %.3f ms, %.3f ms, freeze ratio %.3f%s", cell,
             p->start[i], p->ms[i], p->ratio[i], p->critical[i] ? ", critical" : "");
    tl_set(n, "tooltip", text);
    return n;
}

/* One cluster per rank holding its actions; nodes[i] gets action i. */
static void draw_dag_nodes(Agraph_t *g, const tl_model *m, Agnode_t **nodes)
{
    const tf_schedule *s = &m->plan->schedule;
    const tl_panel *p = &m->panels[m->n_panels - 1];
    for (int r = 0; r < s->ranks; r++) {
        char name[32], label[32];
        snprintf(name, sizeof name, "cluster_rank%d", r);
        Agraph_t *cluster = agsubg(g, name, 1);
        snprintf(label, sizeof label, "rank %d", r);
        agset(cluster, "label", label);
        for (int i = s->rank_offset[r]; i < s->rank_offset[r + 1]; i++)
            nodes[i] = draw_dag_node(cluster, m, p, i);
    }
}

/* Edge e of the DAG (u -> its successor), styled by the first of its rules
 * in rule_styles, with every rule in its classes and tooltip. */
static void draw_dag_edge(Agraph_t *g, const tl_model *m, Agnode_t **nodes, int u, int e)
{
    const tf_dag *dag = &m->dag;
    const tf_schedule *s = &m->plan->schedule;
    int v = dag->succ[e], style = N_RULES - 1;
    for (int k = N_RULES - 1; k >= 0; k--)
        if (dag->rule[e] & rule_styles[k].rule)
            style = k;
    Agedge_t *edge = agedge(g, nodes[u], nodes[v], NULL, 1);
    char a_cell[32], b_cell[32], classes[160] = "dep", tip[256];
    tf_action_format(&s->actions[u], a_cell);
    tf_action_format(&s->actions[v], b_cell);
    int tip_used = snprintf(tip, sizeof tip, "%s -> %s:", a_cell, b_cell);
    for (int k = 0; k < N_RULES; k++) {
        if (!(dag->rule[e] & rule_styles[k].rule))
            continue;
        size_t len = strlen(classes);
        snprintf(classes + len, sizeof classes - len, " rule%d",
                 (int)log2(rule_styles[k].rule) + 1);
        if (tip_used < (int)sizeof tip)
            tip_used += snprintf(tip + tip_used, sizeof tip - (size_t)tip_used, " %s;",
                                 rule_styles[k].name);
    }
    if (dag->lag[e] > 0 && tip_used < (int)sizeof tip)
        snprintf(tip + tip_used, sizeof tip - (size_t)tip_used, " p2p %g ms", dag->lag[e]);
    tl_setf(edge, "id", "e_%s_%s", a_cell, b_cell);
    tl_set(edge, "class", classes);
    tl_set(edge, "tooltip", tip);
    tl_set(edge, "color", rule_styles[style].colour);
    tl_set(edge, "style", rule_styles[style].style);
    tl_set(edge, "penwidth", rule_styles[style].penwidth);
}

/* Legend: one sample edge per rule, in its own cluster; the pair's only
 * when the schedule has pairs. */
static void draw_dag_legend(Agraph_t *g, int pairs)
{
    Agraph_t *legend = agsubg(g, "cluster_legend", 1);
    agset(legend, "label",
          "edges by DAG rule; boxes coloured by type (F blue, B red, I orange, W green),\\l"
          "paler the more frozen, outlined on the critical path\\l");
    agset(legend, "fontsize", "10");
    agset(legend, "fillcolor", "#ffffff");
    for (int rule = 1; rule <= N_RULES; rule++) {
        int k = 0; /* the style entry of this rule number */
        while (k < N_RULES - 1 && rule_styles[k].rule != 1 << (rule - 1))
            k++;
        if (rule_styles[k].rule == TF_EDGE_PAIR && !pairs)
            continue;
        char name[32], text[96];
        snprintf(name, sizeof name, "legend_from_%d", rule);
        Agnode_t *from = agnode(legend, name, 1);
        tl_set(from, "label", "");
        tl_set(from, "width", "0.05");
        tl_set(from, "height", "0.05");
        tl_set(from, "style", "invis");
        snprintf(name, sizeof name, "legend_to_%d", rule);
        Agnode_t *to = agnode(legend, name, 1);
        snprintf(text, sizeof text, "%d. %s", rule, rule_styles[k].name);
        tl_set(to, "label", text);
        tl_set(to, "shape", "plaintext");
        tl_set(to, "style", "");
        tl_set(to, "fontcolor", "#333333");
        Agedge_t *edge = agedge(g, from, to, NULL, 1);
        tl_set(edge, "color", rule_styles[k].colour);
        tl_set(edge, "style", rule_styles[k].style);
        tl_set(edge, "penwidth", rule_styles[k].penwidth);
    }
}

/* Draws the dependency graph (--dag) into c: the actions in one cluster
 * per rank, every DAG edge styled by its rule, and a legend; dot lays it
 * out.  Returns 0 or TF_ENOMEM. */
int tl_draw_dependency_graph(tf_canvas *c, const tl_model *m, const tf_timeline_options *opt,
                             tf_error *err)
{
    Agraph_t *g = tl_canvas_graph(c);
    set_graph_defaults(g, m, opt);
    Agnode_t **nodes = calloc((size_t)m->n + 1, sizeof *nodes);
    if (!nodes)
        return tf_fail(err, TF_ENOMEM, "out of memory drawing %d actions", m->n);
    draw_dag_nodes(g, m, nodes);
    for (int u = 0; u < m->dag.n; u++)
        for (int e = m->dag.succ_offset[u]; e < m->dag.succ_offset[u + 1]; e++)
            draw_dag_edge(g, m, nodes, u, e);
    free(nodes);
    draw_dag_legend(g, tf_schedule_has_pairs(&m->plan->schedule));
    return 0;
}
