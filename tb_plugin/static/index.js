// The tf_stitch tab. For now it explains how to produce data for it.
export async function render() {
  const main = document.createElement('div');
  main.style.fontFamily = 'Roboto, sans-serif';
  main.style.padding = '24px';
  const title = document.createElement('h2');
  title.textContent = 'tf_stitch';
  const text = document.createElement('p');
  text.textContent =
    'No tf_stitch data in this logdir yet. Optimize a model with tf_stitch.optimize(...) ' +
    'and see `tf-stitch --help` for the commands that write profiles here.';
  main.append(title, text);
  document.body.appendChild(main);
}
