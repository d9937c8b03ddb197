package cli

import (
	"io"
	"strings"
	"unicode/utf8"
)

// layout is how stdout's tables are laid out (CLI.layout).
type layout struct {
	// width is the terminal's width in columns; 0 when stdout is not a
	// terminal: no line is cut to a width then.
	width int
	// color: colour the statuses and the headers (ANSI SGR sequences).
	color bool
}

// Styles: ANSI SGR parameters.
const (
	styleBold   = "1"
	styleRed    = "31"
	styleGreen  = "32"
	styleYellow = "33"
	styleCyan   = "36"
)

// Table layout.
const (
	// cellPadding is the space between two columns.
	cellPadding = 2
	// minFlexWidth is the least a free-text column is cut to on a narrow
	// terminal: the line wraps rather than lose the whole text.
	minFlexWidth = 20
)

// table lays text out in columns cellPadding spaces apart, as
// text/tabwriter would (the last column is not padded), and on a terminal
// cuts its free-text column to fit the terminal's width and colours cells;
// colour does not change the layout, nor, off a terminal, anything at all.
type table struct {
	lay  layout
	rows [][]string
	// head: the first row is a header (bold in colour).
	head bool
	// flex is the free-text column (-1: none), which on a terminal is cut
	// to the room the other columns leave (at least minFlexWidth runes).
	// Off a terminal it is cut to flexMax runes (0: never).
	flex, flexMax int
	// style returns the SGR style of cell col of row ("" for none); nil
	// for none at all.
	style func(row []string, col int) string
	// minWidths are the least widths of the first columns, in runes (nil:
	// each column is as wide as its widest cell): tables written one
	// after another (events --follow) then line up, as long as their
	// cells fit.
	minWidths []int
}

// newTable returns a table laid out as lay, with no free-text column.
func newTable(lay layout) *table { return &table{lay: lay, flex: -1} }

// add appends a row. Every row of a table has the same number of cells.
func (t *table) add(cells ...string) { t.rows = append(t.rows, cells) }

// write writes the table to w.
func (t *table) write(w io.Writer) error {
	if len(t.rows) == 0 {
		return nil
	}
	t.cutFlex()
	widths := t.widths()
	var b strings.Builder
	for r, row := range t.rows {
		for i, text := range row {
			style := ""
			switch {
			case !t.lay.color:
			case t.head && r == 0:
				style = styleBold
			case t.style != nil:
				style = t.style(row, i)
			}
			if style != "" {
				b.WriteString("\x1b[" + style + "m" + text + "\x1b[0m")
			} else {
				b.WriteString(text)
			}
			if i < len(row)-1 {
				b.WriteString(strings.Repeat(" ", widths[i]-utf8.RuneCountInString(text)+cellPadding))
			}
		}
		b.WriteByte('\n')
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// widths returns the width of each column: its widest cell, in runes.
func (t *table) widths() []int {
	widths := make([]int, len(t.rows[0]))
	copy(widths, t.minWidths)
	for _, row := range t.rows {
		for i, text := range row {
			widths[i] = max(widths[i], utf8.RuneCountInString(text))
		}
	}
	return widths
}

// cutFlex cuts the cells of the free-text column (not the header's): on a
// terminal to the room left on a line one column narrower than the
// terminal, else to flexMax.
func (t *table) cutFlex() {
	if t.flex < 0 || t.flex >= len(t.rows[0]) {
		return
	}
	limit := t.flexMax
	if t.lay.width > 0 {
		widths := t.widths()
		last := len(widths) - 1
		used := 0
		for i, w := range widths {
			switch {
			case i == t.flex:
				if i < last {
					used += cellPadding
				}
			case i < last:
				used += w + cellPadding
			default:
				used += w
			}
		}
		limit = max(t.lay.width-1-used, minFlexWidth)
	}
	if limit <= 0 {
		return
	}
	for r, row := range t.rows {
		if t.head && r == 0 {
			continue
		}
		row[t.flex] = truncate(row[t.flex], limit)
	}
}

// statusStyle is the colour of a run's or a step's status: green for
// success, red for a failure, yellow for what was stopped or undone, cyan
// for what runs.
func statusStyle(status string) string {
	switch status {
	case "succeeded":
		return styleGreen
	case "failed":
		return styleRed
	case "cancelled", "compensating", "compensated", "skipped", "rolled_back":
		return styleYellow
	case "running":
		return styleCyan
	}
	return ""
}
